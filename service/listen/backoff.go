package listen

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Backoff wraps a listener so that Accept survives resource exhaustion:
// on EMFILE, ENFILE, ENOBUFS, ENOMEM or an aborted handshake it waits
// (doubling from 5 ms up to max) and tries again instead of returning an
// error. The accept loop stops serving on the first accept error, and a proxy
// that exits when it runs out of descriptors takes the control plane down
// with it. Connections meanwhile wait in the kernel backlog.
type Backoff struct {
	net.Listener
	Max time.Duration
	// OnError is told of each error that was backed off (for metrics and
	// logs); it may be nil.
	OnError func(err error)

	closeOnce sync.Once
	closed    chan struct{}
}

// NewBackoff wraps ln.
func NewBackoff(ln net.Listener, max time.Duration, onError func(error)) *Backoff {
	return &Backoff{Listener: ln, Max: max, OnError: onError, closed: make(chan struct{})}
}

// Accept returns the next connection, waiting out transient errors.
func (l *Backoff) Accept() (net.Conn, error) {
	delay := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err == nil || !transient(err) {
			return c, err
		}
		if l.OnError != nil {
			l.OnError(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-l.closed:
			t.Stop()
			return nil, net.ErrClosed
		case <-t.C:
		}
		delay = min(2*delay, l.Max)
	}
}

// Close closes the listener and ends any backoff wait.
func (l *Backoff) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// transient reports whether an accept (or socket) error is a passing
// shortage or a client that gave up, rather than a broken listener.
func transient(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EPROTO, syscall.EPERM, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FDShortage reports whether err means the process or system is out of
// file descriptors.
func FDShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Reasons lists every name Reason gives, so the metrics start at 0.
func Reasons() []string { return []string{"emfile", "enfile", "nomem", "aborted", "other"} }

// Reason names a transient error for metrics labels.
func Reason(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return "emfile"
	case errors.Is(err, syscall.ENFILE):
		return "enfile"
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return "nomem"
	case errors.Is(err, syscall.ECONNABORTED):
		return "aborted"
	default:
		return "other"
	}
}
