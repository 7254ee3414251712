package proxy

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// A backend whose kernel drops our SYNs (its accept queue is full) costs
// a client no more than the dial timeout: the proxy's own connect gives
// up then (the logged reason is that deadline, not the kernel's
// TCP_USER_TIMEOUT, 10 s here), marks it suspect and dials another backend.
func TestDialTimeoutTriesAnotherBackend(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		stuck := fullBacklog(t)
		good := echoBackend(t)
		pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "stuck", Address: stuck}, {Name: "good", Address: good}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range pool.Backends() {
			pool.Observe(b, balance.CheckPassed)
		}
		var logs testutil.Buffer
		p := New(pool, Options{DialTimeout: 300 * time.Millisecond, DialAttempts: 2, KeepAlive: 15 * time.Second,
			UserTimeout: 10 * time.Second, AcceptBackoffMax: 100 * time.Millisecond}, testCounters(), slog.New(slog.NewTextHandler(&logs, nil)))
		pingThrough(t, serveOnLoopback(t, usePlain(p, plain)), 4)
		if want := "backend=stuck address=" + stuck + ` err="dial ` + stuck + `: connect: i/o timeout"`; !strings.Contains(logs.String(), want) {
			t.Errorf("no dial timeout logged (%s):\n%s", want, logs.String())
		}
		b := pool.Lookup("stuck")
		if n := counterValue(t, b.Stats.DialErrors); n < 1 {
			t.Errorf("%v dial errors on the backend that never answers, want at least 1", n)
		}
		if st := b.State(); st != balance.Suspect {
			t.Errorf("the backend that never answers is %s, want suspect", st)
		}
	})
}

// fullBacklog is the address of a listening socket whose accept queue is
// full (nobody accepts): Linux drops further SYNs, so a connect to it
// neither succeeds nor fails until it times out.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	// A backlog of 0 holds one connection; two to be sure it is full.
	for range 2 {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

// The proxy's own accept and dial speak IPv6 as well: client and backend
// addresses on ::1, the client's address as the proxy logs it.
func TestIPv6ClientAndBackend(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		backend, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		t.Cleanup(func() { backend.Close() })
		seen := make(chan string, 1)
		go func() {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			seen <- c.RemoteAddr().String()
			echo(c)
		}()
		pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "v6", Address: backend.Addr().String()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var logs testutil.Buffer
		p := New(pool, Options{DialTimeout: time.Second, DialAttempts: 1, AcceptBackoffMax: 100 * time.Millisecond},
			testCounters(), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err := usePlain(p, plain).Start([]net.Listener{ln}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.StopAccepting(); p.Close() })
		c := dial(t, ln.Addr().String())
		roundTrip(t, c, "over IPv6")
		if from := <-seen; net.ParseIP(mustHost(t, from)).To4() != nil {
			t.Errorf("the backend saw %s, want an IPv6 address", from)
		}
		if want := "client=" + c.LocalAddr().String(); !strings.Contains(logs.String(), want) {
			t.Errorf("the debug line lacks %q: %s", want, logs.String())
		}
	})
}

func mustHost(t *testing.T, hostPort string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
