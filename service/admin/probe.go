package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// probeWriteTimeout bounds the write of one answer on the probe socket. An
// answer of a few hundred bytes to a new connection fits its socket buffer
// and never waits; the bound only keeps a kernel surprise from stalling
// the accept loop.
const probeWriteTimeout = 100 * time.Millisecond

// ServeProbe answers readiness on ln, the probe socket any local user may
// reach, until ctx is done: every connection gets /readyz's answer as
// soon as it is accepted, without a request being read, and is closed at
// once. So no client holds the socket: a slow or silent one (measured on
// 2026-12-06 before this: 64 idle connections from uid nobody held all 16
// slots of the HTTP server that served the socket, 5 s each, and a 1 s
// probe failed 4 of 4) costs the daemon one accept and one write, and
// keepalived's script user and vipproxy announce get their answer within
// their budget whoever floods the socket. A client may still send a
// request (curl, `vipproxy probe`): it is not read, the answer is the same.
func ServeProbe(ctx context.Context, ln net.Listener, src Source, log *slog.Logger) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	wait := time.Duration(0)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors (EMFILE) or another passing failure:
			// back off as net/http does, up to 1 s.
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			log.Warn("probe socket: accept failed; trying again", "err", err, "wait", wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		answerProbe(conn, src.Status())
	}
}

// answerProbe writes /readyz's answer for st on conn as an HTTP/1.1
// response and closes it.
func answerProbe(conn net.Conn, st Status) {
	defer conn.Close()
	code, body := readyzAnswer(st)
	conn.SetWriteDeadline(time.Now().Add(probeWriteTimeout))
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n"+
		"X-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
