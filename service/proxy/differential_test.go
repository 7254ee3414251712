package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The differential stress test runs the same seeded connections through
// the parked relay and the plain one (plainengine_test.go), against the
// same scripted backends, and compares what each side received and how
// each connection ended.

// What a scripted connection does.
const (
	kindEcho          = iota // the backend echoes everything
	kindClientReset          // the client resets after reading some of the echo
	kindBackendReset         // the backend resets after echoing some
	kindDieUnanswered        // the first backend reads everything and resets without answering
	numKinds
)

// diffHeader is the size of the line a scripted client sends first: its
// token, kind, size and resetAfter, padded.
const diffHeader = 64

// scenario is one scripted connection.
type scenario struct {
	kind       int
	payload    []byte
	chunks     []int           // write sizes, summing to len(payload)
	pauses     []time.Duration // before each chunk
	halfClose  bool            // the client half-closes after its last chunk
	resetAfter int             // kindClientReset, kindBackendReset: echoed bytes before the reset
	echoPause  time.Duration   // the backend's pause before each write of its echo
}

// makeScenarios draws n scenarios from rng, and the backends' pauses
// from pauses (a stream of its own, so that they leave the rest as it is).
func makeScenarios(rng, pauses *rand.Rand, n int) []scenario {
	out := make([]scenario, n)
	for i := range out {
		s := &out[i]
		s.kind = rng.IntN(numKinds)
		var size int
		switch r := rng.IntN(10); {
		case r < 5:
			size = 1 + rng.IntN(2000)
		case r < 8:
			size = 2000 + rng.IntN(18000) // across the replay limit (maxReplay)
		default:
			size = 20000 + rng.IntN(280000)
		}
		s.payload = make([]byte, size)
		for j := range s.payload {
			s.payload[j] = byte(rng.Uint32())
		}
		for left := size; left > 0; {
			c := min(left, 1+rng.IntN(size))
			s.chunks = append(s.chunks, c)
			var pause time.Duration
			if rng.IntN(3) == 0 {
				pause = time.Duration(rng.IntN(3000)) * time.Microsecond
			}
			s.pauses = append(s.pauses, pause)
			left -= c
		}
		s.halfClose = rng.IntN(2) == 0
		if pauses.IntN(4) == 0 {
			s.echoPause = time.Duration(pauses.IntN(2000)) * time.Microsecond
		}
		if size > 1 {
			s.resetAfter = 1 + rng.IntN(size-1)
		} else if s.kind == kindClientReset || s.kind == kindBackendReset {
			s.kind = kindEcho
		}
	}
	return out
}

// outcome is how one connection ended, on both sides.
type outcome struct {
	got        []byte // what the client received
	clientEnd  string // eof, reset, complete (the client had it all and closed), timeout
	backendEnd string // how the last backend's connection ended
}

// scriptedBackends are two backends that do what each connection's
// header says; a kindDieUnanswered token dies on its first connection
// only, so that its replay reaches one that answers.
type scriptedBackends struct {
	addrs []string
	mu    sync.Mutex
	seen  map[string]bool
	ends  map[string]string
}

func newScriptedBackends(t *testing.T) *scriptedBackends {
	b := &scriptedBackends{seen: map[string]bool{}, ends: map[string]string{}}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		b.addrs = append(b.addrs, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go b.serve(c.(*net.TCPConn))
			}
		}()
	}
	return b
}

func (b *scriptedBackends) serve(c *net.TCPConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	var hdr [diffHeader]byte
	var token string
	var kind, size, resetAfter int
	var echoPause time.Duration
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return // a replayed connection's dead first backend, or a reset before the header
	}
	fmt.Sscan(string(hdr[:]), &token, &kind, &size, &resetAfter, &echoPause)
	b.mu.Lock()
	first := !b.seen[token]
	b.seen[token] = true
	b.mu.Unlock()
	end := "eof"
	switch {
	case kind == kindDieUnanswered && first:
		io.ReadFull(c, make([]byte, size))
		c.SetLinger(0)
		token, end = token+"#died", "died" // its replay, if any, ends under token
	case kind == kindBackendReset:
		if _, err := io.CopyN(c, c, int64(resetAfter)); err != nil {
			end = endClass(err)
		}
		c.SetLinger(0)
	default:
		end = endClass(echoAll(c, echoPause))
	}
	b.mu.Lock()
	b.ends[token] = end
	b.mu.Unlock()
}

// echoAll echoes until the end of the stream, pausing before each
// write, then half-closes.
func echoAll(c *net.TCPConn, pause time.Duration) error {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			time.Sleep(pause)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return c.CloseWrite()
			}
			return err
		}
	}
}

func (b *scriptedBackends) end(token string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.ends[token]
	return e, ok
}

func endClass(err error) string {
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return "eof"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOTCONN):
		// ENOTCONN: the half-close after the echo met a reset.
		return "reset"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	}
	return "error: " + err.Error()
}

// runScenario plays s through the proxy at addr.
func runScenario(addr, token string, s *scenario) outcome {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return outcome{clientEnd: endClass(err)}
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	hdr := fmt.Sprintf("%s %d %d %d %d", token, s.kind, len(s.payload), s.resetAfter, s.echoPause)
	hdr += string(bytes.Repeat([]byte(" "), diffHeader-len(hdr)))
	// A reset's error goes to one system call: the writer's, if it
	// writes when the reset comes, and the reader then sees the end of
	// the stream. The reader takes the writer's error into account.
	wrote := make(chan error, 1)
	go func() {
		_, err := conn.Write([]byte(hdr))
		at := 0
		for i, n := range s.chunks {
			if err != nil {
				break
			}
			time.Sleep(s.pauses[i])
			_, err = conn.Write(s.payload[at : at+n])
			at += n
		}
		if err == nil && s.halfClose {
			conn.CloseWrite()
		}
		wrote <- err
	}()
	var got bytes.Buffer
	buf := make([]byte, 8192)
	for {
		want := len(buf)
		if s.kind == kindClientReset {
			want = min(want, s.resetAfter-got.Len())
		}
		n, err := conn.Read(buf[:want])
		got.Write(buf[:n])
		switch {
		case s.kind == kindClientReset && got.Len() == s.resetAfter:
			conn.SetLinger(0)
			return outcome{got: got.Bytes(), clientEnd: "reset-sent"}
		case err == io.EOF:
			if werr := <-wrote; endClass(werr) == "reset" {
				err = werr
			}
			return outcome{got: got.Bytes(), clientEnd: endClass(err)}
		case err != nil:
			return outcome{got: got.Bytes(), clientEnd: endClass(err)}
		case got.Len() == len(s.payload) && !s.halfClose:
			return outcome{got: got.Bytes(), clientEnd: "complete"}
		}
	}
}

// runAll plays every scenario, eight at a time, and collects the
// outcomes with the backends' ends.
func runAll(t *testing.T, addr, engine string, be *scriptedBackends, scenarios []scenario) []outcome {
	out := make([]outcome, len(scenarios))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range scenarios {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = runScenario(addr, fmt.Sprintf("%s-%d", engine, i), &scenarios[i])
		}()
	}
	wg.Wait()
	for i := range out {
		token := fmt.Sprintf("%s-%d", engine, i)
		if s := &scenarios[i]; s.kind == kindDieUnanswered && !replayable(s) {
			token += "#died" // no replay: the backend that died is the last
		}
		if !waitFor(func() bool { _, ok := be.end(token); return ok }) {
			t.Errorf("%s: connection %d: its backend connection did not end", engine, i)
		}
		out[i].backendEnd, _ = be.end(token)
	}
	return out
}

// replayable: the client's bytes fit what the session keeps for a replay.
func replayable(s *scenario) bool { return diffHeader+len(s.payload) <= maxReplay }

// backendEndIsSet: how the backend's connection ends does not depend on
// timing; a client that half-closed and then resets may do so after its
// backend echoed everything and ended.
func backendEndIsSet(s *scenario) bool { return s.kind != kindClientReset || !s.halfClose }

// expect checks an outcome against what the scenario must give on any
// engine: the exact echo unless a reset cut it (then a prefix of it),
// and the end each kind must have.
func expect(s *scenario, o outcome) error {
	full := s.kind == kindEcho || (s.kind == kindDieUnanswered && replayable(s))
	wantEnd := map[bool]string{true: "eof", false: "complete"}[s.halfClose]
	switch {
	case full && !bytes.Equal(o.got, s.payload):
		return fmt.Errorf("got %d of %d bytes (equal prefix: %v), want all", len(o.got), len(s.payload), bytes.HasPrefix(s.payload, o.got))
	case full && o.clientEnd != wantEnd:
		return fmt.Errorf("client ended with %s, want %s", o.clientEnd, wantEnd)
	case !bytes.HasPrefix(s.payload, o.got):
		return fmt.Errorf("got %d bytes that are not a prefix of what was sent", len(o.got))
	case s.kind == kindDieUnanswered && !replayable(s) && (o.clientEnd != "reset" || len(o.got) > 0):
		return fmt.Errorf("more than the replay keeps, its backend died: client got %d bytes and %s, want none and a reset", len(o.got), o.clientEnd)
	case s.kind == kindBackendReset && o.clientEnd != "reset":
		return fmt.Errorf("the backend reset: client ended with %s after %d bytes, want a reset", o.clientEnd, len(o.got))
	case s.kind == kindClientReset && !s.halfClose && o.backendEnd != "reset":
		return fmt.Errorf("the client reset: its backend ended with %s, want a reset", o.backendEnd)
	}
	return nil
}

// TestEnginesAgree: the same seeded connections (sizes on both sides of
// the replay limit, writes in random chunks with random pauses on both
// sides, half closes, resets of either side, backends that die before
// answering)
// through the parked relay and through the plain one give each the
// byte streams and ends that the scenario calls for, and the same ends
// on both.
func TestEnginesAgree(t *testing.T) {
	const seed = 20261206
	n := 160
	if testing.Short() || raceOn {
		n = 60
	}
	scenarios := makeScenarios(rand.New(rand.NewPCG(seed, seed)), rand.New(rand.NewPCG(seed, 1)), n)
	be := newScriptedBackends(t)
	results := map[string][]outcome{}
	for _, e := range engines {
		_, _, addr := startProxyOn(t, e.plain, be.addrs...)
		results[e.name] = runAll(t, addr, e.name, be, scenarios)
	}
	ends, total := map[string]int{}, 0
	for i := range scenarios {
		total += len(scenarios[i].payload)
		for _, e := range engines {
			o := results[e.name][i]
			ends[fmt.Sprintf("kind %d: client %s, backend %s", scenarios[i].kind, o.clientEnd, o.backendEnd)]++
		}
	}
	t.Logf("%d connections per relay, %d bytes sent each; ends: %v", n, total, ends)
	for i := range scenarios {
		s := &scenarios[i]
		what := fmt.Sprintf("connection %d (seed %d; kind %d, %d bytes in %d writes, half-close %v, reset after %d)",
			i, seed, s.kind, len(s.payload), len(s.chunks), s.halfClose, s.resetAfter)
		for _, e := range engines {
			if err := expect(s, results[e.name][i]); err != nil {
				t.Errorf("%s, %s relay: %v", what, e.name, err)
			}
		}
		p, q := results["parked"][i], results["plain"][i]
		if p.clientEnd != q.clientEnd || (backendEndIsSet(s) && p.backendEnd != q.backendEnd) {
			t.Errorf("%s: the parked relay ended client %s, backend %s; the plain one client %s, backend %s",
				what, p.clientEnd, p.backendEnd, q.clientEnd, q.backendEnd)
		}
	}
}
