package testutil

import (
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// NotifySocket is a NOTIFY_SOCKET that collects sd_notify datagrams, as
// systemd does, until the test ends.
type NotifySocket struct {
	Path string
	mu   sync.Mutex
	msgs []string
	at   []time.Time // when each of msgs was received
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
			n.at = append(n.at, time.Now())
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

// Times returns when each datagram that is msg was received, in order.
func (n *NotifySocket) Times(msg string) []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var at []time.Time
	for i, m := range n.msgs {
		if m == msg {
			at = append(at, n.at[i])
		}
	}
	return at
}
