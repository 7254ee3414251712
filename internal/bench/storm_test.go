package bench

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"
)

// A storm's CPU window starts half a period after an event burst, so
// that every contender's window holds the same bursts, whole.
func TestQuietPointLiesBetweenBursts(t *testing.T) {
	epoch := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ now, want time.Duration }{
		{0, watchPeriod / 2},
		{watchPeriod / 2, watchPeriod / 2},
		{watchPeriod/2 + time.Millisecond, watchPeriod + watchPeriod/2},
		{watchPeriod - time.Millisecond, watchPeriod + watchPeriod/2},
		{7*watchPeriod + watchPeriod/3, 7*watchPeriod + watchPeriod/2},
	} {
		got := quietPointAfter(epoch, epoch.Add(tc.now)).Sub(epoch)
		if got != tc.want {
			t.Errorf("quiet point after epoch+%s = epoch+%s, want epoch+%s", tc.now, got, tc.want)
		}
		if (got-watchPeriod/2)%watchPeriod != 0 {
			t.Errorf("quiet point epoch+%s is not half a period after a burst", got)
		}
	}
}

// The window is the same whole number of periods for every contender
// whose watches were back in time, and whole periods for one that was late.
func TestStormWindowIsWholePeriods(t *testing.T) {
	want := time.Duration(stormWindowPeriods["kill-backend"]) * watchPeriod
	for _, elapsed := range []time.Duration{0, time.Second, want} {
		if got := stormWindow("kill-backend", elapsed); got != want {
			t.Errorf("storm of %s: window %s, want %s", elapsed, got, want)
		}
	}
	late := want + time.Millisecond
	if got := stormWindow("kill-backend", late); got != want+watchPeriod {
		t.Errorf("storm of %s: window %s, want %s", late, got, want+watchPeriod)
	}
	for sc := range stormTitles {
		if stormWindowPeriods[sc] < 1 {
			t.Errorf("storm %s has no CPU window", sc)
		}
	}
}

// Failed attempts are told apart by step and cause, from the errors real
// sockets give: refused (no listener), reset (a listener that went away
// with the connection in its queue), EOF (closed).
func TestFailureCauseFromRealSockets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	go func() {
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// After the ClientHello: the client's connect is done.
			c.Read(make([]byte, 64<<10)) // all of it: unread bytes make a close a reset
			if i == 0 {
				c.(*net.TCPConn).SetLinger(0) // a reset
			}
			c.Close()
		}
	}()
	handshake := func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		return nil
	}
	if got := failureCause(handshake()); got != "TLS handshake reset" {
		t.Errorf("a reset handshake is %q", got)
	}
	if got := failureCause(handshake()); got != "TLS handshake EOF" {
		t.Errorf("a closed handshake is %q", got)
	}
	l.Close()
	if got := failureCause(handshake()); got != "connect refused" {
		t.Errorf("a refused connect is %q", got)
	}
	if got := failedBy(map[string]int64{"connect refused": 3, "TLS handshake reset": 7}); got != "TLS handshake reset 7, connect refused 3" {
		t.Errorf("failedBy = %q", got)
	}
}

// The storms hold what the load core connects at once within half the
// clients' handshake limit, in hundreds, from 100 to 5,000: 5,000 that
// take it 12 s would time out with no proxy at all.
func TestStormSizeFitsTheHandshakeBudget(t *testing.T) {
	for _, tc := range []struct {
		each time.Duration
		want int
	}{
		{2 * time.Millisecond, 2500},
		{2800 * time.Microsecond, 1700},
		{500 * time.Microsecond, stormClientsMax},
		{100 * time.Millisecond, 100},
		{0, stormClientsMax},
	} {
		got := fitWatches(tc.each)
		if got != tc.want {
			t.Errorf("%s a watch: %d watches, want %d", tc.each, got, tc.want)
		}
		if got > 100 && time.Duration(got)*tc.each > stormHandshakeBudget {
			t.Errorf("%s a watch: %d watches take %s, past the %s budget", tc.each, got, time.Duration(got)*tc.each, stormHandshakeBudget)
		}
	}
}
