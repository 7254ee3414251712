package proxy

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// TestParkerCoalescesAStormOfPushes: backends' messages to many parked
// connections whose clients are quiet, each arriving alone a little after
// the one before (a storm's watch events), are passed on in rounds of
// many over real sockets: the parker pauses instead of waiting, and an
// epoll call serves several messages. Woken for each (before coalescing),
// it made 0.4 to 0.7 calls a message here. The sending must itself be a
// storm: a host too busy to write 9 messages in 10 within engine.CoalesceGap/3
// of the one before is given three tries.
func TestParkerCoalescesAStormOfPushes(t *testing.T) {
	addr, pushers := pushBackend(t)
	p, _, proxyAddr := startParking(t, addr)
	const n, rounds, msg = 64, 5, "event"
	conns := openParked(t, p, proxyAddr, n)
	backends := make([]net.Conn, n)
	for i := range backends {
		select {
		case backends[i] = <-pushers: // openParked waited for every hello
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d backend connections handed over", i, n)
		}
	}
	pk := p.relay
	sent := n * rounds
	var gap time.Duration
	for try := range 3 {
		time.Sleep(2 * engine.CoalesceGap) // the clients' hellos are past: pushes from now on
		callsBefore, pausesBefore := pk.ParkerCalls(), pk.ParkerPauses()
		gap = sendStorm(t, backends, rounds, msg, 30*time.Microsecond)
		for i, c := range conns {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, rounds*len(msg))); err != nil {
				t.Fatalf("connection %d: events: %v", i, err)
			}
		}
		calls, pauses := pk.ParkerCalls()-callsBefore, pk.ParkerPauses()-pausesBefore
		t.Logf("try %d: %d messages, 9 in 10 sent within %v of the one before, passed on with %d epoll calls and %d pauses", try+1, sent, gap, calls, pauses)
		if gap >= engine.CoalesceGap/3 {
			continue // not a storm
		}
		if calls > uint64(sent)/4 {
			t.Errorf("parker made %d epoll calls for %d messages, want at most one per four", calls, sent)
		}
		return
	}
	t.Skipf("this host is too busy to send a storm: 1 message in 10 over %v after the one before, in each of 3 tries", gap)
}

// pushBackend is a backend that answers openParked's "hello" and then
// hands the connection to the test (on the channel) to push messages on.
func pushBackend(t *testing.T) (string, <-chan net.Conn) {
	conns := make(chan net.Conn, 128)
	addr := testutil.ServeAddr(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "hello" {
			return
		}
		c.Write(buf[:n])
		conns <- c
		io.Copy(io.Discard, c) // until the client or the test's end closes it
	})
	return addr, conns
}

// sendStorm writes msg on each of conns in turn, rounds times, spin apart,
// and returns the time between two writes that 9 in 10 stayed within.
func sendStorm(t *testing.T, conns []net.Conn, rounds int, msg string, spin time.Duration) time.Duration {
	t.Helper()
	var gaps []time.Duration
	last := time.Now()
	for range rounds {
		for _, c := range conns {
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatalf("write: %v", err)
			}
			now := time.Now()
			gaps = append(gaps, now.Sub(last))
			last = now
			for time.Since(now) < spin { // a sleep that short would take a millisecond or more
			}
		}
	}
	slices.Sort(gaps)
	return gaps[len(gaps)*9/10]
}

// TestParkerDoesNotPauseInAnExchange: one connection's requests and
// answers, back to back, wake the parker soon after each wait, but a
// pause would hold back the next message of the exchange while its
// client waits: pausing on every quick wake, the parker held back every
// answer, and as the pauses spaced the messages out the connection never
// turned busy enough to leave the parker (one connection's ping-pong 21
// times slower).
func TestParkerDoesNotPauseInAnExchange(t *testing.T) {
	p, _, addr := startParking(t, echoBackend(t))
	conns := openParked(t, p, addr, 1)
	pk := p.relay
	pausesBefore := pk.ParkerPauses()
	const rounds = 20
	for range rounds {
		roundTrip(t, conns[0], "request")
	}
	// An answer slower than engine.CoalesceGap is a push; an emulated host may
	// make one now and then.
	if pauses, slow := pk.ParkerPauses()-pausesBefore, uint64(rounds/10); pauses > slow {
		t.Errorf("parker paused %d times in %d round trips, want at most %d", pauses, rounds, slow)
	}
}
