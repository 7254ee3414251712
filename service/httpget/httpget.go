// Package httpget sends one HTTP/1.1 GET on a connection of its own: the
// health checks, discovery and the CLI's questions to the daemon all do.
// A plain Request.Write and http.ReadResponse instead of http.Client:
// its transport adds about 0.4 MB to the binary for pooling, proxies and
// HTTP/2 that one request per connection does not use, and it finishes a
// cancelled dial in the background (to reuse it later), which would leave
// half-open checks to a hanging backend.
package httpget

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Get sends req, a GET, on conn, which the caller dialled for it alone,
// and returns the answer with its body still to read. ctx bounds the
// whole exchange, body included: when it ends, conn is closed. Writing the
// request and reading the answer's headers are also bounded by
// headerTimeout (0: only by ctx), so a silent server cannot hold a long
// stream's caller (a watch) that has no deadline. Closing the body closes
// conn; on error conn is closed already.
func Get(ctx context.Context, conn net.Conn, req *http.Request, headerTimeout time.Duration) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(what string, err error) (*http.Response, error) {
		stop()
		conn.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	deadline, _ := ctx.Deadline()
	if headerTimeout > 0 {
		deadline = earliest(deadline, time.Now().Add(headerTimeout))
	}
	conn.SetDeadline(deadline)
	req.Close = true // Connection: close, the server need not wait for more
	if err := req.Write(conn); err != nil {
		return fail("send request", ctxErr(ctx, err))
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fail("read response", ctxErr(ctx, err))
	}
	conn.SetDeadline(time.Time{}) // the body is bounded by ctx alone
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// connBody closes the connection with the body.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *connBody) Close() error {
	b.stop()
	b.ReadCloser.Close()
	return b.conn.Close()
}

// earliest is the earlier of two deadlines; zero is none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// ctxErr names ctx's end when it is what ended the exchange: the
// connection was closed then, and "use of closed network connection"
// would hide that a server accepted and never answered.
func ctxErr(ctx context.Context, err error) error {
	if cause := ctx.Err(); cause != nil {
		return cause
	}
	return err
}
