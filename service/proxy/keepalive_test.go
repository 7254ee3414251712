package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// Both sockets of a proxied connection send enough keepalive probes
// before TCP_USER_TIMEOUT ends it: Linux ends an idle connection there
// once one probe is unanswered, and with the defaults (15 s idle, 30 s
// user timeout) probes 15 s apart made one lost probe fatal.
func TestKeepAliveProbesFitTheUserTimeout(t *testing.T) {
	def := config.Default().Timeouts
	backend := echoBackend(t)
	pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "b", Address: backend}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(pool, Options{DialTimeout: time.Second, DialAttempts: 1, KeepAlive: def.KeepAlive.Duration,
		UserTimeout: def.UserTimeout.Duration, AcceptBackoffMax: 100 * time.Millisecond}, testCounters(), slog.New(slog.DiscardHandler))
	// Plain TCP, as the daemon listens (service/listen) and systemd hands
	// over: Go's default MPTCP listener refuses TCP_USER_TIMEOUT.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start([]net.Listener{ln}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.StopAccepting(); p.Close() })
	c := dial(t, ln.Addr().String())
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// The proxy's two sockets: the one it accepted (its peer is our
	// client) and the one it dialed (its peer is the backend).
	sides := map[string]string{c.LocalAddr().String(): "client side", backend: "backend side"}
	found := 0
	for fd, peer := range ownTCPSockets(t) {
		side, ok := sides[peer]
		if !ok {
			continue
		}
		found++
		idle, intvl, user := sockopt(t, fd, unix.TCP_KEEPIDLE), sockopt(t, fd, unix.TCP_KEEPINTVL), sockopt(t, fd, unix.TCP_USER_TIMEOUT)
		// Probes go out at idle, idle+interval, ... while short of the
		// user timeout; there the first unanswered one ends the connection.
		probes := (user/1000 - idle + intvl - 1) / intvl
		t.Logf("%s: keepalive idle %d s, interval %d s, user timeout %d ms: %d probes", side, idle, intvl, user, probes)
		if user != int(def.UserTimeout.Milliseconds()) || probes < 4 {
			t.Errorf("%s: %d probes before the %d ms user timeout, want 4 (idle %d s, interval %d s)", side, probes, user, idle, intvl)
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the proxy's 2 sockets", found)
	}
}

// ownTCPSockets maps this process's connected TCP sockets to their peers.
func ownTCPSockets(t *testing.T) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[int]string{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if sa, err := unix.Getpeername(fd); err == nil {
			if in, ok := sa.(*unix.SockaddrInet4); ok {
				out[fd] = netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)).String()
			}
		}
	}
	return out
}

func sockopt(t *testing.T, fd, opt int) int {
	t.Helper()
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, opt)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
