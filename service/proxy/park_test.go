package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(cond func() bool) bool {
	for i := 0; i < 1000; i++ {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q, %v; want %q", buf, err, msg)
	}
}

// quickStreak makes n round trips on c and returns the longest run of
// consecutive ones that each took under half of engine.BusyGap.
func quickStreak(t *testing.T, c net.Conn, n int) int {
	t.Helper()
	run, longest := 0, 0
	for range n {
		start := time.Now()
		roundTrip(t, c, "ping")
		if time.Since(start) < engine.BusyGap/2 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// startParking is startProxy for a test of the parker; it skips the test
// where the parker cannot run (no epoll).
func startParking(t *testing.T, addrs ...string) (*Proxy, *balance.Pool, string) {
	t.Helper()
	p, pool, addr := startProxy(t, addrs...)
	if p.relay.Parkers() == 0 {
		t.Skip("no epoll for parking")
	}
	return p, pool, addr
}

// openParked opens n connections through p at addr, each with one round
// trip to the echo backend, and waits until both directions of every one
// are parked (idle). They are closed when the test ends.
func openParked(t *testing.T, p *Proxy, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, addr)
		roundTrip(t, conns[i], "hello")
	}
	if !waitFor(func() bool { return p.relay.Parked() == 2*n }) {
		t.Fatalf("%d of %d idle directions parked after 10 s", p.relay.Parked(), 2*n)
	}
	return conns
}

// TestIdleConnectionsHoldNoGoroutines: once idle, a connection's two
// directions wait in the parker without a goroutine each, and wake up
// when data arrives.
func TestIdleConnectionsHoldNoGoroutines(t *testing.T) {
	p, _, addr := startParking(t, echoBackend(t))
	const n = 40
	before := runtime.NumGoroutine()
	conns := openParked(t, p, addr, n)
	// The echo backend in this process keeps one goroutine per connection;
	// the proxy must keep (well) under one.
	if extra := runtime.NumGoroutine() - before; extra >= n+n/2 {
		t.Errorf("%d idle connections hold %d goroutines (backend: %d): the proxy keeps goroutines for idle directions", n, extra, n)
	}
	for i, c := range conns {
		roundTrip(t, c, "again")
		if i%2 == 0 {
			c.(*net.TCPConn).CloseWrite()
		}
	}
	// Half-closed ones end by the backend's EOF, through a parked direction.
	for i, c := range conns {
		if i%2 == 0 {
			if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
				t.Fatalf("after half-close: %q, %v; want a clean EOF", b, err)
			}
		}
		c.Close()
	}
	if !waitFor(func() bool { return p.Open() == 0 }) {
		t.Fatalf("%d connections still open after every client closed", p.Open())
	}
	if !waitFor(func() bool { return p.relay.Parked() == 0 }) {
		t.Fatalf("%d directions still parked after every connection ended", p.relay.Parked())
	}
}

// TestParkedConnectionsCanBeClosed: CloseAll (drain timeout, removed
// backend) ends parked connections, so a drain finishes.
func TestParkedConnectionsCanBeClosed(t *testing.T) {
	p, pool, addr := startParking(t, echoBackend(t))
	const n = 10
	openParked(t, p, addr, n)
	if closed := pool.Backends()[0].CloseAll(); closed != n {
		t.Fatalf("CloseAll closed %d, want %d", closed, n)
	}
	if !waitFor(func() bool { return p.Open() == 0 }) {
		t.Fatalf("%d parked connections still open after CloseAll", p.Open())
	}
}

// TestParkedUnansweredIsEvacuated: a request parked on a backend that
// never answers is replayed on another backend when that one goes down.
func TestParkedUnansweredIsEvacuated(t *testing.T) {
	silent := silentBackend(t)
	p, pool, addr := startParking(t, silent, echoBackend(t))
	c := dial(t, addr) // round-robin: the silent one first
	c.Write([]byte("ping"))
	if !waitFor(func() bool { return p.relay.Parked() == 2 }) {
		t.Fatalf("%d of 2 directions parked", p.relay.Parked())
	}
	b := pool.Lookup(silent)
	pool.Observe(b, balance.CheckFailed)
	if n := b.EvacuateAll(); n != 1 {
		t.Fatalf("evacuated %d, want 1", n)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("after evacuating a parked connection: %q, %v; want the echo from the other backend", buf, err)
	}
}

// TestParkWakeUnderClose: connections that keep parking and waking (a
// message every 0-600 ms) while their backend's connections are closed
// all end, none is left open or parked.
func TestParkWakeUnderClose(t *testing.T) {
	p, pool, addr := startParking(t, echoBackend(t))
	const n = 30
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		c := dial(t, addr)
		go func() {
			defer func() { done <- struct{}{} }()
			buf := make([]byte, 1)
			for j := 0; j < 100; j++ {
				time.Sleep(time.Duration((i*37+j*53)%600) * time.Millisecond)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write([]byte{byte(j)}); err != nil {
					return
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					return // closed by CloseAll
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	pool.Backends()[0].CloseAll()
	for i := 0; i < n; i++ {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a client did not see its connection closed")
		}
	}
	if !waitFor(func() bool { return p.Open() == 0 && p.relay.Parked() == 0 }) {
		t.Fatalf("after CloseAll: %d open, %d parked; want 0, 0", p.Open(), p.relay.Parked())
	}
}

// TestParkedDirectionsRelayInPlace: small messages on idle connections
// (watch events) are passed on by the parker itself, both ways, and the
// directions stay parked; a message larger than the buffer, and the end
// of the stream, still come through whole.
func TestParkedDirectionsRelayInPlace(t *testing.T) {
	p, _, addr := startParking(t, echoBackend(t))
	const n = 20
	conns := openParked(t, p, addr, n)
	for round := 0; round < 3; round++ {
		for _, c := range conns {
			roundTrip(t, c, "event")
		}
		// Without relaying in place each message took its directions out
		// of the parker for one to two engine.ParkAfter periods.
		if got := p.relay.Parked(); got != 2*n {
			t.Fatalf("round %d: %d of %d directions parked right after their messages, want all", round, got, 2*n)
		}
	}
	// The parker counts a message after writing it: the echo may reach
	// the client first.
	if !waitFor(func() bool { return p.relay.RelayedInPlace() >= 3*2*n }) {
		got := p.relay.RelayedInPlace()
		t.Errorf("parker relayed %d messages in place, want at least %d", got, 3*2*n)
	}
	big := strings.Repeat("0123456789abcdef", 3*engine.CopyBufSize/16)
	roundTrip(t, conns[0], big)
	conns[1].(*net.TCPConn).CloseWrite()
	conns[1].SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(conns[1]); err != nil || len(b) != 0 {
		t.Fatalf("half-closed while parked: %q, %v; want a clean EOF", b, err)
	}
}

// TestParkedFirstAnswerRelayedInPlace: a backend that answers only after
// both directions parked (a handshake slowed by a storm) gets its answer
// passed on by the parker, which binds the session, and the client's
// next message goes in place too.
func TestParkedFirstAnswerRelayedInPlace(t *testing.T) {
	slow := testutil.ServeAddr(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		time.Sleep(4 * engine.ParkAfter)
		c.Write(buf[:n])
		echo(c)
	})
	p, _, addr := startParking(t, slow)
	c := dial(t, addr)
	roundTrip(t, c, "hello") // answered after both directions parked
	if got := p.relay.Parked(); got != 2 {
		t.Fatalf("%d of 2 directions parked right after the first answer, want both", got)
	}
	roundTrip(t, c, "again")
	waitFor(func() bool { return p.relay.RelayedInPlace() >= 3 }) // counted after the write
	if got, relayed := p.relay.Parked(), p.relay.RelayedInPlace(); got != 2 || relayed < 3 {
		t.Errorf("after a second round trip: %d parked, %d relayed in place; want 2 and at least 3", got, relayed)
	}
}

// TestParkedUnansweredBackendCloseIsReplayed: a backend that closes
// without answering after both directions parked costs the client
// nothing: the parker leaves the end of stream to the direction's
// goroutine, which replays the bytes on another backend.
func TestParkedUnansweredBackendCloseIsReplayed(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "fin", true: "reset"}[reset], func(t *testing.T) {
			quitter := testutil.ServeAddr(t, func(c net.Conn) {
				defer c.Close()
				c.Read(make([]byte, 64))
				time.Sleep(4 * engine.ParkAfter)
				if reset {
					c.(*net.TCPConn).SetLinger(0)
				}
			})
			_, _, addr := startParking(t, quitter, echoBackend(t)) // round-robin: the quitter first
			c := dial(t, addr)
			roundTrip(t, c, "ping")
		})
	}
}

// TestParkerRelaysWithOneEpollCallPerMessage: a message that the parker
// passes on costs it one epoll_wait and no epoll_ctl (edge-triggered
// entries need no re-arm, and readiness is kept between rounds). With
// one-shot entries and a fresh wait per round it cost three calls: a
// wait, a re-arm and an empty wait. The kernel may wake Go's poller twice
// for one message (ep_poll_callback wakes the outer epoll on every
// callback, even for an entry already ready), and the second wake finds
// nothing: under qemu-user (arm64) one empty wait showed in 3 of ~1,000
// runs (and failed CI at stop 35), so a tenth more calls than messages
// is allowed.
func TestParkerRelaysWithOneEpollCallPerMessage(t *testing.T) {
	p, _, addr := startParking(t, echoBackend(t))
	conns := openParked(t, p, addr, 2)
	pk := p.relay
	const rounds = 20
	callsBefore, relayedBefore := pk.ParkerCalls(), pk.RelayedInPlace()
	for i := 0; i < rounds; i++ {
		roundTrip(t, conns[i%2], "event")
		time.Sleep(2 * engine.BusyGap) // events now and then: a busy direction leaves the parker
	}
	// Two messages per round trip, counted after their writes.
	if !waitFor(func() bool { return pk.RelayedInPlace()-relayedBefore >= 2*rounds }) {
		t.Fatalf("parker relayed %d of %d messages in place", pk.RelayedInPlace()-relayedBefore, 2*rounds)
	}
	relayed, calls := pk.RelayedInPlace()-relayedBefore, pk.ParkerCalls()-callsBefore
	if spuriousWakes := relayed / 10; calls > relayed+spuriousWakes {
		t.Errorf("parker made %d epoll calls for %d messages relayed in place, want one each (and at most %d empty waits)", calls, relayed, spuriousWakes)
	}
	if got := pk.Parked(); got != 4 {
		t.Errorf("%d of 4 directions parked after the messages, want all", got)
	}
}

// TestParkedEndWithLastMessage: a last message and the end of the stream
// that reach a parked direction together both get through. Edge-triggered,
// the end raises no event of its own once the message's read is done:
// passing the message on in place and staying parked left the client
// waiting for an end that had come.
func TestParkedEndWithLastMessage(t *testing.T) {
	lastWords := testutil.ServeAddr(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if string(buf[:n]) == "bye" {
				c.Write([]byte("last")) // the close right after: its FIN comes with it
				return
			}
			c.Write(buf[:n])
		}
	})
	p, _, addr := startParking(t, lastWords)
	const n = 10
	conns := openParked(t, p, addr, n)
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("bye"))
		if b, err := io.ReadAll(c); err != nil || string(b) != "last" {
			t.Fatalf("connection %d: %q, %v; want the last message, then the end", i, b, err)
		}
	}
}

// TestParkerRelaysWithoutAllocating: a message the parker passes on
// allocates nothing (its reads and writes through RawConn.Control use a
// callback bound once per direction). With a closure each, every message
// cost five heap allocations: ten per round trip here.
func TestParkerRelaysWithoutAllocating(t *testing.T) {
	if raceOn || engine.LockRankChecked {
		t.Skip("the race detector and the lock order check allocate")
	}
	p, _, addr := startParking(t, echoBackend(t))
	c := openParked(t, p, addr, 1)[0]
	pk := p.relay
	msg, buf := []byte("event"), make([]byte, 5)
	exchange := func(rounds int) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		for i := 0; i < rounds; i++ {
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * engine.BusyGap) // not busy: the parker keeps it
		}
	}
	exchange(10) // every direction has bound its callback
	const rounds = 200
	relayed := pk.RelayedInPlace()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	exchange(rounds)
	runtime.ReadMemStats(&after)
	if got := pk.RelayedInPlace() - relayed; got < rounds {
		t.Fatalf("parker relayed %d messages in place for %d round trips, want about two each", got, rounds)
	}
	// The client, the echo backend and the runtime allocate a little too.
	if perRound := float64(after.Mallocs-before.Mallocs) / rounds; perRound >= 2 {
		t.Errorf("%.1f allocations per round trip through parked directions, want under 2", perRound)
	}
}

// TestShortConnectionsNeedNoGoroutine: a connection's directions start in
// the parker, which passes the first bytes on (kept for a replay until
// the backend answers), the answer, and both ends of the stream, so a
// request-sized connection runs without a goroutine of its own (before:
// two each, and with the idle check an hour away, none ever parked).
func TestShortConnectionsNeedNoGoroutine(t *testing.T) {
	pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "echo", Address: echoBackend(t)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(pool, Options{DialTimeout: time.Second, DialAttempts: 1, AcceptBackoffMax: 100 * time.Millisecond},
		testCounters(), slog.New(slog.DiscardHandler))
	p.relay.SetIdleCheck(time.Hour)
	if p.relay.Parkers() == 0 {
		t.Skip("no epoll for parking")
	}
	addr := serveOnLoopback(t, p)
	const n = 20
	for range n {
		c := dial(t, addr)
		roundTrip(t, c, "hello")
		c.Close()
	}
	if !waitFor(func() bool { return p.Open() == 0 }) {
		t.Fatalf("%d of %d connections still open 10 s after their clients closed", p.Open(), n)
	}
	relayed, goroutines := p.relay.RelayedInPlace(), p.relay.Goroutines()
	t.Logf("%d connections: %d messages relayed in place, %d direction goroutines", n, relayed, goroutines)
	if relayed < 2*n || goroutines != 0 {
		t.Errorf("%d connections: %d messages relayed in place, %d direction goroutines; want at least %d and none", n, relayed, goroutines, 2*n)
	}
	if got := p.relay.Parked(); got != 0 {
		t.Errorf("%d directions still parked after every connection ended", got)
	}
}

// TestBusyDirectionLeavesTheParker: a connection whose messages follow
// each other closely (one client's ping-pong) leaves the parker for
// goroutines, which serve it with one epoll wait a message instead of
// two nested ones, and parks again once idle.
//
// "Quick" is engine.BusyGap apart, which a loaded host can stretch: the test
// sends bursts until one leaves the parker (bounded), fails only when
// the client saw a whole quick streak and the parker kept the
// direction, and skips when the host never managed one.
func TestBusyDirectionLeavesTheParker(t *testing.T) {
	p, _, addr := startParking(t, echoBackend(t))
	c := dial(t, addr)
	sawStreak := false
	for burst := 0; burst < 50 && p.relay.Goroutines() == 0; burst++ {
		sawStreak = quickStreak(t, c, 4*engine.BusyStreak) >= 2*engine.BusyStreak || sawStreak
	}
	if got := p.relay.Goroutines(); got == 0 && !sawStreak {
		t.Skipf("this host never made %d round trips each under %s: too slow to tell a busy direction", 2*engine.BusyStreak, engine.BusyGap/2)
	} else if got == 0 {
		t.Errorf("after %d round trips each under %s no direction left the parker for a goroutine", 2*engine.BusyStreak, engine.BusyGap/2)
	}
	if !waitFor(func() bool { return p.relay.Parked() == 2 }) {
		t.Fatalf("%d of 2 directions parked again after the connection went idle", p.relay.Parked())
	}
	roundTrip(t, c, "again")
}

// TestParkerServesOthersWhileAReplayDials: while a session whose backend
// closed before answering dials another one for its replay, and that dial
// waits (a backend whose listen queue is full drops the SYN), the parker
// keeps the session's next client bytes for the replay, passes on the
// client's end after them, and goes on serving every other connection.
// Before, the dial ran under the session's lock and the parker waited on
// it in keep: every connection of that parker stalled for up to the dial
// timeout.
func TestParkerServesOthersWhileAReplayDials(t *testing.T) {
	quitter := testutil.ServeAddr(t, func(c net.Conn) {
		defer c.Close()
		c.Read(make([]byte, 64)) // the first bytes, then gone without an answer
	})
	full, release := testutil.FullListener(t, echo)
	var bs []config.Backend
	for i, a := range []string{echoBackend(t), quitter, full} {
		bs = append(bs, config.Backend{Name: fmt.Sprint("b", i), Address: a})
	}
	pool, err := balance.NewPool(config.RoundRobin, bs, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(pool, Options{DialTimeout: 20 * time.Second, DialAttempts: 3, AcceptBackoffMax: 100 * time.Millisecond},
		testCounters(), slog.New(slog.DiscardHandler))
	if p.relay.Parkers() == 0 {
		t.Skip("no epoll for parking")
	}
	p.relay.KeepParkers(1) // one parker: both connections on it
	addr := serveOnLoopback(t, p)

	other := dial(t, addr) // to the echo backend
	roundTrip(t, other, "hello")
	c := dial(t, addr) // to the quitter: its replay dials the full listener
	if _, err := c.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return p.counters.Retries.Value() >= 1 }) {
		t.Fatal("no replay began after the backend closed without answering")
	}
	if _, err := c.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	time.Sleep(50 * time.Millisecond) // the parker takes "second" before the next round trip
	roundTrip(t, other, "ping")       // fails at its deadline if the parker waits for the dial
	release()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if got, err := io.ReadAll(c); err != nil || string(got) != "firstsecond" {
		t.Fatalf("replayed connection echoed %q, %v; want %q and the end of the stream", got, err, "firstsecond")
	}
}
