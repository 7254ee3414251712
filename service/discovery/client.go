package discovery

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/vipproxy/vipproxy/service/httpget"
)

// errTooLarge is a list body or watch event above its bound.
var errTooLarge = errors.New("answer larger than the bound")

// apiError is a non-200 answer of the API.
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Message) }

// client makes plain HTTP/1.1 requests to one apiserver address at a time.
type client struct {
	creds    Credentials
	timeout  time.Duration // dial, TLS handshake and response headers
	maxBody  int64
	maxEvent int64
}

// get sends one GET for the kubernetes EndpointSlices to addr with the
// given extra query, on a connection of its own (httpget; its answer also
// reads a chunked watch stream). The credentials are read again for each
// request.
func (c *client) get(ctx context.Context, addr string, q url.Values) (*http.Response, error) {
	m, err := c.creds.load()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	q.Set("labelSelector", selector)
	q.Set("fieldSelector", fieldSelector)
	u := &url.URL{Scheme: "https", Host: addr, Path: slicesPath, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "vipproxy-discovery")
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	// The timeout covers the dial and the handshake, then the request and
	// the answer's headers; ctx, the body.
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: c.timeout}, Config: m.tls}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	resp, err := httpget.Get(ctx, conn, req, c.timeout)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var st status
		msg := string(body)
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return nil, &apiError{Code: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// list reads every kubernetes EndpointSlice and the list's resource version.
func (c *client) list(ctx context.Context, addr string) (view, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*c.timeout)
	defer cancel()
	resp, err := c.get(ctx, addr, url.Values{})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("read list: %w", err)
	}
	if int64(len(body)) > c.maxBody {
		return nil, "", fmt.Errorf("list: %w (%d bytes)", errTooLarge, c.maxBody)
	}
	var l sliceList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, "", fmt.Errorf("read list: %w", err)
	}
	if l.Metadata.ResourceVersion == "" {
		return nil, "", errors.New("read list: no resourceVersion")
	}
	v := view{}
	for i := range l.Items {
		// The field selector leaves only the apiservers' slice; a server
		// that ignored it would send others, never read.
		if l.Items[i].foreign() == "" {
			v[l.Items[i].Metadata.Name] = l.Items[i].endpoints()
		}
	}
	return v, l.Metadata.ResourceVersion, nil
}

// watch follows changes from rv for up to timeout, calling changed after
// each event (touched: the endpoints changed). It returns nil when the
// server ends the stream cleanly, errGone when rv has expired,
// errShortWatch when the stream ended within a second with no event (as
// client-go's reflector has it: a server that closes every watch at once
// is failing, not quiet), else the error.
func (c *client) watch(ctx context.Context, addr string, v view, rv string, timeout time.Duration, changed func(rv string, touched bool)) error {
	// The server ends the watch after timeoutSeconds; the client's own
	// deadline is later and only guards against a silent server.
	ctx, cancel := context.WithTimeout(ctx, timeout+2*c.timeout)
	defer cancel()
	q := url.Values{}
	q.Set("watch", "1")
	q.Set("resourceVersion", rv)
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", strconv.Itoa(max(1, int(timeout/time.Second))))
	start := time.Now()
	resp, err := c.get(ctx, addr, q)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == http.StatusGone {
		return errGone
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lim := &eventLimit{r: resp.Body}
	dec := json.NewDecoder(lim)
	for events := 0; ; events++ {
		lim.left = c.maxEvent
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) && events == 0 && time.Since(start) < minWatch {
				return errShortWatch
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("watch stream: %w", err)
		}
		next, touched, gone, err := v.apply(ev)
		if gone {
			return errGone
		}
		if err != nil {
			return err
		}
		changed(next, touched)
	}
}

// minWatch is how long a watch without an event must last not to count
// as a failure (client-go's reflector: one second).
const minWatch = time.Second

// errShortWatch is a watch the server closed within minWatch, no event sent.
var errShortWatch = errors.New("very short watch: the server closed it within a second, no event received")

// errGone is a 410: the resource version is too old, list again.
var errGone = errors.New("resource version expired (410 Gone)")

// eventLimit fails a read once more than left bytes were read since the
// last reset: one watch event may not grow the decoder's buffer without
// bound. The decoder reads ahead, so the bound is per event plus one read.
type eventLimit struct {
	r    io.Reader
	left int64
}

func (l *eventLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
