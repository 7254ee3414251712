package testutil

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// WildcardListener listens on every IPv4 address at a free port, with
// SO_REUSEPORT when shares (as kube-apiserver --permit-port-sharing=true
// binds), until the test ends.
func WildcardListener(t testing.TB, shares bool) *net.TCPListener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if !shares {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return errors.Join(err, serr)
	}}
	l, err := lc.Listen(context.Background(), "tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*net.TCPListener)
}
