package testutil

import (
	"net"
	"path/filepath"
	"sync"
	"testing"
)

// NotifySocket is a NOTIFY_SOCKET that collects sd_notify datagrams, as
// systemd does, until the test ends.
type NotifySocket struct {
	Path string
	mu   sync.Mutex
	msgs []string
}

// NewNotifySocket listens on a new socket in the test's directory.
func NewNotifySocket(t testing.TB) *NotifySocket {
	t.Helper()
	n := &NotifySocket{Path: filepath.Join(t.TempDir(), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n
}

// Env is the entry that points a child at the socket.
func (n *NotifySocket) Env() string { return "NOTIFY_SOCKET=" + n.Path }

// Messages returns the datagrams received so far, in order.
func (n *NotifySocket) Messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.msgs...)
}
