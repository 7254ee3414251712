package daemon_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// notifySocket collects sd_notify datagrams like systemd does.
type notifySocket struct{ *testutil.NotifySocket }

func newNotifySocket(t *testing.T) *notifySocket {
	return &notifySocket{testutil.NewNotifySocket(t)}
}

// states returns the first line of each message (READY=1, STATUS=..., ...).
func (n *notifySocket) states() []string {
	var out []string
	for _, m := range n.Messages() {
		out = append(out, strings.Split(m, "\n")[0])
	}
	return out
}

func (n *notifySocket) find(prefix string) string {
	for _, m := range n.Messages() {
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
		[]string{ns.Env(), "WATCHDOG_USEC=400000"})
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
	// The datagrams sent before the exit may still wait in the socket for
	// the collector.
	testutil.WaitFor(t, "STOPPING=1 collected", func() bool { return ns.count("STOPPING=1") > 0 })
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
