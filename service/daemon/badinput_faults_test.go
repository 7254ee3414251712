package daemon_test

// Bad input to the running binary, under load: broken config files on
// reload, garbage on the admin endpoint, garbage and abrupt clients on the
// VIP. The daemon must keep serving with its last good config, answer
// garbage with 4xx, change nothing, and never exit.

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

func TestBadReloadsUnderLoad(t *testing.T) {
	s := newSettings(t, apiservers(t, 2)...)
	p := startVIPProxy(t, s, nil)
	p.waitState("b1", "up")
	l := startClientLoad(t, 4, mtlsRequest(t, p.vip))
	good := s.toml()
	noBackends := s
	noBackends.Backends = nil
	for _, tc := range []struct {
		name, content, key string // key: what the error must name ("" = any)
	}{
		{"syntax error", good + "\n[[backend\n", ""},
		{"unknown key", "bogus_key = 1\n" + good, "bogus_key"},
		{"invalid value", strings.Replace(good, "rise = 2", "rise = -1", 1), "health.rise"},
		{"no backends", noBackends.toml(), "backend"},
		// The admin endpoint on the VIP listener's address and port.
		{"admin on the VIP port", strings.Replace(good, fmt.Sprintf("listen = %q", s.Admin), fmt.Sprintf("listen = \"127.0.0.1:%d\"", s.Port), 1), "admin.listen"},
		{"wrong type", strings.Replace(good, fmt.Sprintf("interval = %q", testutil.CheckPeriod(checkInterval)), "interval = 200", 1), "health.interval"},
		{"empty file", "", ""},
		{"file removed", "", ""},
		{"over 1 MiB", good + "\n#" + strings.Repeat("x", 1<<20) + "\n", ""},
		// 36 KB of nested inline tables took the daemon to 1.5 GB before.
		{"nested 9,000 deep", good + "x = " + strings.Repeat("{a=", 9000) + "1" + strings.Repeat("}", 9000) + "\n", "nested deeper"},
	} {
		if tc.name == "file removed" {
			if err := os.Remove(p.cfgPath); err != nil {
				t.Fatal(err)
			}
		} else {
			p.rewrite(tc.content)
		}
		p.signal(syscall.SIGHUP)
		p.waitFor(func() bool { return p.status().ConfigError != "" }, tc.name+": reload error in /status")
		msg := p.status().ConfigError
		t.Logf("%s: %s", tc.name, msg)
		if !strings.Contains(msg, p.cfgPath) || !strings.Contains(msg, tc.key) {
			t.Errorf("%s: error %q should name the file %s and the key %q", tc.name, msg, p.cfgPath, tc.key)
		}
		time.Sleep(100 * time.Millisecond) // the load runs on the old config meanwhile
		if st := p.status(); len(st.Backends) != 2 {
			t.Errorf("%s: the running config changed: %+v", tc.name, st.Backends)
		}
		// Back to a good file: the error clears.
		p.rewrite(good)
		p.signal(syscall.SIGHUP)
		p.waitFor(func() bool { return p.status().ConfigError == "" }, tc.name+": good reload clears the error")
	}
	got := count(l.finish(), time.Time{})
	t.Logf("10 bad reloads, each followed by a good one, under load: %v", got)
	if got.failed > 0 {
		t.Errorf("%d client connections failed (first: %v)", got.failed, got.firstErr)
	}
}

// Garbage and abrupt clients on the admin endpoint and the VIP.
func TestGarbageClients(t *testing.T) {
	s := newSettings(t, apiservers(t, 2)...)
	p := startVIPProxy(t, s, nil)
	p.waitState("b1", "up")
	l := startClientLoad(t, 4, mtlsRequest(t, p.vip))

	// One connection that never finishes its headers must not block others.
	slow, err := net.Dial("tcp", p.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /status HTTP/1.1\r\nHost: x\r\n")
	for _, tc := range []struct{ req, want string }{
		{"GARBAGE\r\n\r\n", "HTTP/1.1 4"},
		{"GET /status HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", "HTTP/1.1 4"},
		{"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 404"},
		{"DELETE /status HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405"},
		{"POST /backends/b0/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 403"}, // mutations off by default
		{"GET /status HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", "HTTP/1.1 4"},
	} {
		if line := statusLine(t, p.admin, tc.req); !strings.HasPrefix(line, tc.want) {
			t.Errorf("admin request %q: %q, want %s...", tc.req[:min(len(tc.req), 40)], line, tc.want)
		}
	}
	if line := statusLine(t, p.admin, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); line != "HTTP/1.1 200 OK" {
		t.Errorf("admin endpoint after garbage: %q", line)
	}

	// On the VIP: clients that close at once, reset at once, or send
	// garbage instead of a TLS ClientHello.
	junk := make([]byte, 4096)
	rand.Read(junk)
	failed, firstErr := forEach(300, func(i int) error {
		c, err := net.DialTimeout("tcp", p.vip, 2*time.Second)
		if err != nil {
			return err
		}
		tc := c.(*net.TCPConn)
		switch i % 3 {
		case 0:
			return tc.Close()
		case 1:
			tc.SetLinger(0)
			return tc.Close()
		default:
			defer tc.Close()
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			tc.Write(junk)
			_, err := io.Copy(io.Discard, tc) // the backend's TLS alert, then close
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("garbage client left hanging: %w", err)
			}
			return nil
		}
	})
	if failed > 0 {
		t.Errorf("%d garbage clients could not connect or hung (first: %v)", failed, firstErr)
	}
	got := count(l.finish(), time.Time{})
	t.Logf("admin: 6 bad requests and a stalled one; VIP: 300 clients closing, resetting or sending garbage; meanwhile %v", got)
	if got.failed > 0 {
		t.Errorf("%d real client connections failed (first: %v)", got.failed, got.firstErr)
	}
	select {
	case <-p.exited:
		t.Fatalf("vipproxy exited: %v", p.err)
	default:
	}
	// A client that resets before the backend answers may make it suspect
	// until its next check; garbage must never take one down.
	for _, b := range p.status().Backends {
		if b.State != "up" && b.State != "suspect" {
			t.Errorf("backend %s is %s after the garbage", b.Name, b.State)
		}
		p.waitState(b.Name, "up")
	}
	if st, _ := p.get("/status"); strings.Contains(st, `"draining":true`) {
		t.Error("a backend is draining: a mutation went through with mutations disabled")
	}
}

// statusLine sends a raw request and returns the answer's status line.
func statusLine(t *testing.T, addr, req string) string {
	t.Helper()
	line, err := testutil.FirstLine(t, addr, req)
	if err != nil {
		return "no answer: " + err.Error()
	}
	return line
}

// A FIFO at the config path wedged reload, and with it SIGTERM: the
// signal loop blocked in open(2). It is refused at once now, and the loop
// never reads the config itself.
func TestFIFOConfigDoesNotWedge(t *testing.T) {
	p := startVIPProxy(t, newSettings(t, apiservers(t, 1)...), nil)
	p.waitState("b0", "up")
	if err := os.Remove(p.cfgPath); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p.cfgPath, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Whatever happens, a writer at the end unblocks an open that hangs.
	t.Cleanup(func() {
		if f, err := os.OpenFile(p.cfgPath, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return strings.Contains(p.status().ConfigError, "not a regular file") }, "the FIFO refused in /status")
	p.signal(syscall.SIGHUP)
	p.stop()
}
