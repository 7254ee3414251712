package admin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// Listen returns the admin listener: the systemd-activated one if given,
// else one opened from cfg.Listen ("host:port" or "unix:/path", judged by
// config.Validate: loopback only unless AllowRemote). It returns nil, nil
// when cfg.Listen is empty and nothing was activated: no admin endpoint.
func Listen(cfg config.Admin, activated net.Listener) (net.Listener, error) {
	if activated != nil {
		return activated, nil
	}
	if cfg.Listen == "" {
		return nil, nil
	}
	if path, ok := strings.CutPrefix(cfg.Listen, "unix:"); ok {
		return ListenUnix(path, 0o660)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", cfg.Listen, err)
	}
	return ln, nil
}

// ListenUnix creates the socket at path with mode. A stale socket file
// left by a crash is removed first; a live one, or any other kind of file,
// is an error rather than something to delete.
func ListenUnix(path string, mode os.FileMode) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin: chmod unix socket %s: %w", path, err)
	}
	return ln, nil
}

func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin: check unix socket %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("admin: %s exists and is not a socket; not removing it", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("admin: unix socket %s is in use by another process", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("admin: remove stale unix socket %s: %w", path, err)
	}
	return nil
}

// MaxConns bounds the admin endpoint's open connections: its clients are
// keepalived's probe, a Prometheus scrape and an operator; idle or silent
// connections beyond that would eat the descriptors the proxy needs.
// Further clients wait in the listen backlog for a free slot.
const MaxConns = 16

// idleTimeout closes a kept-alive admin connection that sends nothing.
const idleTimeout = 10 * time.Second

// limitListener holds at most cap(slots) connections open at once.
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn gives its slot back when closed (once).
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// Serve serves h on ln until ctx is done, then shuts down gracefully
// (bounded) and returns nil. A nil ln (no admin endpoint) just waits.
// The HTTP server's own errors (accept failures, a handler's panic) go to
// log as warnings.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	if ln == nil {
		<-ctx.Done()
		return nil
	}
	ln = newLimitListener(ln, MaxConns)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		// Probes and scrapes come every few seconds at most; a kept-alive
		// connection idle longer only holds one of the MaxConns slots.
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(log.With("component", "admin").Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("admin: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close() // a scrape still running after 5 s is cut off
	}
	<-served
	return nil
}
