package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// pingPong writes msg on c and wants it echoed.
func pingPong(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, buf, err)
	}
}

// A connection frozen in one proxy and resumed in another (as the next
// daemon does with what the store passes it) goes on where it stopped;
// the first proxy no longer counts it, the second does.
func TestFrozenPairResumesElsewhere(t *testing.T) {
	backend := echoBackend(t)
	p1, pool1, addr := startProxy(t, backend)
	c := dial(t, addr)
	pingPong(t, c, "before")
	p1.StopAccepting()
	pairs, rest := p1.Freeze(context.Background(), pool1.Backends(), 5*time.Second, 5*time.Second)
	if len(pairs) != 1 || len(rest) != 0 {
		t.Fatalf("froze %d, left %d; want 1 and 0", len(pairs), len(rest))
	}
	cf, bf, err := pairs[0].Files()
	if err != nil {
		t.Fatal(err)
	}
	pairs[0].Release()
	if n := p1.Open(); n != 0 {
		t.Errorf("the first proxy counts %d connections after the release", n)
	}
	p2, pool2, _ := startProxy(t, backend)
	if err := p2.Resume(cf, bf, pool2.Lookup(backend)); err != nil {
		t.Fatal(err)
	}
	pingPong(t, c, "after the handover")
	if n := p2.Open(); n != 1 {
		t.Errorf("the second proxy counts %d connections, want 1", n)
	}
}

// A connection in its replay window when the handover starts is waited
// for (answerWait, longer than wait) and handed over once its backend
// answers, not closed at wait: the request it carries succeeds through
// the next proxy.
func TestFreezeWaitsForAnAnswerDue(t *testing.T) {
	answer := make(chan struct{})
	backend := testutil.ServeAddr(t, func(c net.Conn) {
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, 6)); err != nil {
			return
		}
		<-answer
		c.Write([]byte("late"))
		io.Copy(c, c)
	})
	p1, pool1, addr := startProxy(t, backend)
	c := dial(t, addr)
	c.Write([]byte("hello?"))
	testutil.WaitFor(t, "the connection relayed", func() bool { return pool1.Backends()[0].Open() == 1 })
	p1.StopAccepting()
	type result struct {
		pairs []*Pair
		rest  []*Unfrozen
	}
	done := make(chan result, 1)
	go func() {
		pairs, rest := p1.Freeze(context.Background(), pool1.Backends(), 100*time.Millisecond, time.Minute)
		done <- result{pairs, rest}
	}()
	time.Sleep(500 * time.Millisecond) // past wait: only answerWait keeps the freeze going
	close(answer)
	r := <-done
	if len(r.pairs) != 1 || len(r.rest) != 0 {
		t.Fatalf("froze %d, left %d; want the answered connection frozen, none left", len(r.pairs), len(r.rest))
	}
	cf, bf, err := r.pairs[0].Files()
	if err != nil {
		t.Fatal(err)
	}
	r.pairs[0].Release()
	p2, pool2, _ := startProxy(t, backend)
	if err := p2.Resume(cf, bf, pool2.Lookup(backend)); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "late" {
		t.Fatalf("the answer through the next proxy: %q, %v", got, err)
	}
	pingPong(t, c, "after the handover")
}

// Resume refuses a backend socket connected elsewhere than the backend
// it is said to be for, and a socket that is not connected.
func TestResumeChecksTheSockets(t *testing.T) {
	backend, other := echoBackend(t), echoBackend(t)
	p1, pool1, addr := startProxy(t, backend)
	c := dial(t, addr)
	pingPong(t, c, "x")
	p1.StopAccepting()
	pairs, _ := p1.Freeze(context.Background(), pool1.Backends(), 5*time.Second, 5*time.Second)
	if len(pairs) != 1 {
		t.Fatalf("froze %d connections, want 1", len(pairs))
	}
	cf, bf, err := pairs[0].Files()
	if err != nil {
		t.Fatal(err)
	}
	pool2, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "other", Address: other}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2 := New(pool2, Options{DialTimeout: time.Second}, testCounters(), slog.New(slog.DiscardHandler))
	defer p2.Close()
	if err := p2.Resume(cf, bf, pool2.Lookup("other")); err == nil {
		t.Error("a backend socket connected to another address was resumed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, _ := ln.(*net.TCPListener).File()
	lf2, _ := ln.(*net.TCPListener).File()
	if err := p2.Resume(lf, lf2, pool2.Lookup("other")); err == nil {
		t.Error("a listening socket was resumed")
	}
}

// What has no quiet point is left to close, with the reason: a backend
// that has not answered (replay window), a connection the backend half
// closed, and one whose backend does not read what the client sends. (A
// client's half-close is handed over: TestHalfClosedClientHandedOver in
// service/daemon.)
func TestFreezeLeavesWhatIsNotQuiet(t *testing.T) {
	release := make(chan struct{})
	answerThenHold := func(readAll bool) string {
		addr := testutil.ServeAddr(t, func(c net.Conn) {
			defer c.Close()
			c.Write([]byte("hi"))
			if readAll {
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
			}
			<-release
		})
		return addr
	}
	cases := []struct {
		reason  string
		backend string
		client  func(c net.Conn)
	}{
		{ReasonReplayWindow, silentBackend(t), func(c net.Conn) { c.Write([]byte("hello?")) }},
		{ReasonHalfClosed, answerThenHold(true), func(c net.Conn) {
			io.ReadFull(c, make([]byte, 2))
		}},
		{ReasonBusy, answerThenHold(false), func(c net.Conn) {
			io.ReadFull(c, make([]byte, 2))
			go c.Write(make([]byte, 64<<20)) // more than every buffer on the way
		}},
	}
	t.Cleanup(func() { close(release) }) // before the servers' own cleanups wait for their handlers
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			p, pool, addr := startProxy(t, tc.backend)
			c := dial(t, addr)
			tc.client(c)
			testutil.WaitFor(t, "the connection relayed", func() bool { return pool.Backends()[0].Open() == 1 })
			time.Sleep(200 * time.Millisecond) // the busy write fills the buffers, the FIN is passed on
			p.StopAccepting()
			pairs, rest := p.Freeze(context.Background(), pool.Backends(), 500*time.Millisecond, 500*time.Millisecond)
			if len(pairs) != 0 || len(rest) != 1 || rest[0].Reason != tc.reason {
				reasons := []string{}
				for _, u := range rest {
					reasons = append(reasons, u.Reason)
				}
				t.Fatalf("froze %d, left %v; want none frozen, one left for %s", len(pairs), reasons, tc.reason)
			}
			rest[0].Close()
			testutil.WaitFor(t, "the connection closed", func() bool { return p.Open() == 0 })
		})
	}
}
