package daemon_test

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// notifySocket collects sd_notify datagrams like systemd does.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
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

// states returns the first line of each message (READY=1, STATUS=..., ...).
func (n *notifySocket) states() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		out = append(out, strings.Split(m, "\n")[0])
	}
	return out
}

func (n *notifySocket) find(prefix string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.msgs {
		if strings.HasPrefix(m, prefix) {
			return m
		}
	}
	return ""
}

func (n *notifySocket) count(prefix string) int {
	c := 0
	for _, s := range n.states() {
		if strings.HasPrefix(s, prefix) {
			c++
		}
	}
	return c
}

// 9. READY, STATUS, RELOADING + MONOTONIC_USEC, READY, STOPPING in order,
// and watchdog pings when WATCHDOG_USEC is set.
func TestNotifyProtocol(t *testing.T) {
	ns := newNotifySocket(t)
	p := startVIPProxy(t, newSettings(t, backend(t, "a").Addr()),
		[]string{"NOTIFY_SOCKET=" + ns.path, "WATCHDOG_USEC=400000"})
	p.waitFor(func() bool { return ns.count("READY=1") == 1 }, "READY=1")
	if m := ns.find("READY=1"); !strings.Contains(m, "STATUS=") || !strings.Contains(m, "backends healthy") {
		t.Errorf("READY message %q carries no STATUS with backend health", m)
	}
	p.waitFor(func() bool { return ns.count("WATCHDOG=1") >= 2 }, "watchdog pings")
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return ns.count("READY=1") == 2 }, "READY=1 after reload")
	if m := ns.find("RELOADING=1"); !strings.Contains(m, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING message %q lacks MONOTONIC_USEC", m)
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	var seq []string
	for _, s := range ns.states() {
		if s == "READY=1" || s == "RELOADING=1" || s == "STOPPING=1" {
			seq = append(seq, s)
		}
	}
	if got := strings.Join(seq, " "); got != "READY=1 RELOADING=1 READY=1 STOPPING=1" {
		t.Errorf("notify sequence = %s", got)
	}
	if ns.count("STATUS=") == 0 && !strings.Contains(ns.find("READY=1"), "STATUS=") {
		t.Error("no STATUS sent")
	}
}
