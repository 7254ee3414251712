package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// watchSpec is one storm client process: Clients watches through
// Targets, used round-robin (the proxy, or the backends themselves for
// the direct baseline).
type watchSpec struct {
	Targets []string
	Clients int
	Sources int           // loopback source addresses 127.0.0.1..N
	Period  time.Duration // the backends' event period (stall detection)
	AtOnce  bool          // storm (c): the mark is the start, every watch connects at once
	Wait    time.Duration // how long "wait" waits for every watch to work again
	// ProbeEvery, if set, opens a new connection this often from the
	// mark until "wait": a request loop (connect, TLS handshake, WATCH,
	// ACK, close) whose delays the upgrade storm reports.
	ProbeEvery time.Duration
}

// The reconnection policy of a client-go reflector: a watch that ends is
// started again at once; a watch that cannot be started waits the
// backoff manager's next step, 800 ms doubling to 30 s, plus a random
// jitter of up to as much again (wait.NewExponentialBackoffManager(800ms,
// 30s, 2m, 2.0, 1.0)). The steps count from the mark: the manager resets
// after two calm minutes, which the mark stands for.
const (
	backoffInitial = 800 * time.Millisecond
	backoffMax     = 30 * time.Second
	attemptTimeout = 10 * time.Second // dial, TLS handshake and ACK (client-go: 30 s dial, 10 s handshake)
)

func backoffFor(step int) time.Duration {
	d := backoffInitial << min(step, 6)
	d = min(d, backoffMax)
	return d + rand.N(d)
}

// watchResult is what the storm client prints after "wait" (one JSON line).
type watchResult struct {
	Clients    int     `json:"clients"`
	Disrupted  int     `json:"disrupted"` // watches that ended after the mark (storm c: all)
	Recovered  int     `json:"recovered"` // of those, working again when the wait ended
	P50ms      float64 `json:"p50_ms"`    // mark to a working watch again, over the disrupted
	P99ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	Failed     int64   `json:"failed"` // connection attempts that failed after the mark
	FirstError string  `json:"first_error,omitempty"`
	Lost       int64   `json:"lost"`    // events missed after the mark (gaps in the sequence)
	Stalled    int64   `json:"stalled"` // watches that went silent for 3 periods
	Shares     []int   `json:"shares"`  // working watches per backend (1, 2, 3) at the end
	// FailedBy counts the failed attempts by step and cause ("connect
	// refused", "TLS handshake reset"...): refused before a listener
	// exists, reset in a dying one's queue, cut by the proxy.
	FailedBy map[string]int64 `json:"failed_by,omitempty"`
	// The new connections of the request loop (ProbeEvery), from the
	// mark: how many were tried, how many failed, and the delay until
	// the ACK of those that worked.
	Probes          int64   `json:"probes,omitempty"`
	ProbeFailed     int64   `json:"probe_failed,omitempty"`
	ProbeFirstError string  `json:"probe_first_error,omitempty"`
	ProbeP50ms      float64 `json:"probe_p50_ms,omitempty"`
	ProbeP99ms      float64 `json:"probe_p99_ms,omitempty"`
	ProbeMaxMs      float64 `json:"probe_max_ms,omitempty"`
}

// watcher is one watch client.
type watcher struct {
	mu      sync.Mutex
	lastSeq int64     // last event seen, 0 before the first
	endedAt time.Time // its watch ended after the mark (zero: it did not)
	backAt  time.Time // its watch works again after that
	backend int       // serving it now, 0 while it has no watch
	step    int       // backoff steps since the mark
	gen     int       // the mark generation step counts from
	cut     bool      // the storm is expected to end its watch
	// markBackend served it at the mark.
	markBackend int
}

type stormClient struct {
	spec     watchSpec
	tls      *tls.Config
	next     atomic.Uint64
	watchers []*watcher
	up       atomic.Int64 // watches working now
	mu       sync.Mutex
	mark     time.Time
	gen      int
	failed   atomic.Int64
	lost     atomic.Int64
	stalled  atomic.Int64
	first    string
	failedBy map[string]int64 // under mu
	probes   *prober          // under mu: the request loop since the mark
}

// markedLine is the client's answer to "mark".
const markedLine = `{"marked":true}`

// runWatchClient runs the storm client: it starts the watches, prints
// {"established":N} once all work (AtOnce: the result), then obeys stdin lines
// "mark" (the storm starts now: it prints {"marked":true} once the mark is
// set, and the storm must not start before, or watches it cuts first are
// not counted; the request loop, if any, starts) and "wait all", "wait
// backend 1" or "wait none" (which watches the storm cuts: print the result
// once the request loop's last connection is done, each of those watches
// has ended and every watch works again); EOF on stdin ends it.
func runWatchClient(ctx context.Context, spec watchSpec, tlsCfg *tls.Config, stdin io.Reader, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &stormClient{spec: spec, tls: tlsCfg}
	if spec.AtOnce {
		s.setMark()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range spec.Clients {
		w := &watcher{}
		if spec.AtOnce {
			w.endedAt, w.cut = s.mark, true
		}
		s.watchers = append(s.watchers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, w, i)
		}()
	}
	enc := json.NewEncoder(stdout)
	if spec.AtOnce {
		if err := s.waitAndReport(ctx, enc); err != nil {
			return err
		}
	} else {
		if !s.waitAllUp(ctx, time.Now().Add(time.Minute)) {
			return fmt.Errorf("only %d of %d watches working after 1m (first error: %s)", s.up.Load(), spec.Clients, s.firstError())
		}
		enc.Encode(map[string]int{"established": spec.Clients})
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "mark":
			s.setMark()
			if spec.ProbeEvery > 0 {
				s.startProbes(ctx)
			}
			io.WriteString(stdout, markedLine+"\n")
		case "wait all", "wait backend 1", "wait none":
			s.expectCut(sc.Text())
			if err := s.waitAndReport(ctx, enc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *stormClient) setMark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mark = time.Now()
	s.gen++
	for _, w := range s.watchers {
		w.mu.Lock()
		w.markBackend = w.backend
		w.mu.Unlock()
	}
	s.failed.Store(0)
	s.lost.Store(0)
	s.stalled.Store(0)
	s.first = ""
	s.failedBy = map[string]int64{}
}

// expectCut marks the watches the storm cuts: all, those that were on
// backend 1 at the mark, or none.
func (s *stormClient) expectCut(what string) {
	for _, w := range s.watchers {
		w.mu.Lock()
		w.cut = what == "wait all" || (what == "wait backend 1" && w.markBackend == 1)
		w.mu.Unlock()
	}
}

func (s *stormClient) marked() (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mark, s.gen
}

func (s *stormClient) fail(err error) {
	s.failed.Add(1)
	s.mu.Lock()
	if s.first == "" {
		s.first = err.Error()
	}
	if s.failedBy == nil {
		s.failedBy = map[string]int64{}
	}
	s.failedBy[failureCause(err)]++
	s.mu.Unlock()
}

// failureCause names a failed attempt by its step (watchOnce's prefix:
// connect, TLS handshake, send watch, read ACK) and its cause.
func failureCause(err error) string {
	step, _, _ := strings.Cut(err.Error(), ":")
	cause := "other"
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		cause = "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		cause = "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		cause = "EOF"
	case isTimeout(err):
		cause = "timeout"
	}
	return step + " " + cause
}

func (s *stormClient) failures() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.failedBy)
}

func (s *stormClient) firstError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// run keeps watcher w watching until ctx ends.
func (s *stormClient) run(ctx context.Context, w *watcher, i int) {
	for ctx.Err() == nil {
		err := s.watchOnce(ctx, w)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			continue // the watch worked and ended: start it again at once
		}
		s.fail(err)
		_, gen := s.marked()
		w.mu.Lock()
		if w.gen != gen {
			w.step, w.gen = 0, gen
		}
		wait := backoffFor(w.step)
		w.step++
		w.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchOnce makes one attempt: connect, handshake, WATCH, ACK, then
// events until the watch ends. It returns an error only for an attempt
// that never got a working watch.
func (s *stormClient) watchOnce(ctx context.Context, w *watcher) error {
	c, r, backend, last, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s.seen(w, last, true)
	s.watching(w, backend)
	defer s.ended(w)
	s.events(c, r, w)
	return nil
}

// open connects, handshakes, sends WATCH and reads the ACK: a working
// watch, its reader, the backend serving it and the latest event sent
// before it started. Its error names the step that failed.
func (s *stormClient) open(ctx context.Context) (c *tls.Conn, r *bufio.Reader, backend int, last int64, err error) {
	conn, err := s.dial(ctx)
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	c = tls.Client(conn, s.tls)
	c.SetDeadline(time.Now().Add(attemptTimeout))
	if err = c.HandshakeContext(ctx); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("TLS handshake: %w", err)
	}
	if _, err = fmt.Fprintf(c, "WATCH %d\n", s.next.Load()); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("send watch: %w", err)
	}
	r = bufio.NewReaderSize(c, 512)
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("read ACK: %w", err)
	}
	kind, b, last, err := parseWatchLine(line)
	if err == nil && kind != watchAck {
		err = errors.New("not an ACK")
	}
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("read ACK: got %.40q: %w", line, err)
	}
	return c, r, int(b), last, nil
}

func (s *stormClient) dial(ctx context.Context) (net.Conn, error) {
	n := s.next.Add(1)
	d := net.Dialer{Timeout: attemptTimeout}
	if s.spec.Sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+n%uint64(s.spec.Sources)))}
		d.Control = bindNoPort
	}
	return d.DialContext(ctx, "tcp", s.spec.Targets[n%uint64(len(s.spec.Targets))])
}

// events reads events until the watch ends or stays silent for three
// periods, counting the ones missed since the last seen.
func (s *stormClient) events(c *tls.Conn, r *bufio.Reader, w *watcher) {
	for {
		c.SetReadDeadline(time.Now().Add(3*s.spec.Period + time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			if isTimeout(err) {
				s.stalled.Add(1)
			}
			return
		}
		kind, seq, _, err := parseWatchLine(line)
		if err != nil || kind != watchEvent {
			return
		}
		s.seen(w, seq, false)
	}
}

// seen counts, after the mark, the events w missed: those before event
// seq, which it received, or up to seq itself for an ACK (seq is then the
// latest event sent before its watch started).
func (s *stormClient) seen(w *watcher, seq int64, ack bool) {
	mark, _ := s.marked()
	w.mu.Lock()
	defer w.mu.Unlock()
	missed := seq - w.lastSeq - 1
	if ack {
		missed++
	}
	if w.lastSeq > 0 && missed > 0 && !mark.IsZero() {
		s.lost.Add(missed)
	}
	w.lastSeq = max(w.lastSeq, seq)
}

func (s *stormClient) watching(w *watcher, backend int) {
	now := time.Now()
	w.mu.Lock()
	w.backend = backend
	if !w.endedAt.IsZero() {
		w.backAt = now
	}
	w.mu.Unlock()
	s.up.Add(1)
}

func (s *stormClient) ended(w *watcher) {
	s.up.Add(-1)
	mark, _ := s.marked()
	now := time.Now()
	w.mu.Lock()
	w.backend = 0
	if !mark.IsZero() {
		w.endedAt, w.backAt = now, time.Time{}
	}
	w.mu.Unlock()
}

// waitAllUp waits until every watch works, or the deadline.
func (s *stormClient) waitAllUp(ctx context.Context, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s.up.Load() == int64(s.spec.Clients) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// waitAndReport waits until every watch works again (bounded by
// spec.Wait) and prints the result.
func (s *stormClient) waitAndReport(ctx context.Context, enc *json.Encoder) error {
	s.stopProbes()
	deadline := time.Now().Add(s.spec.Wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s.up.Load() == int64(s.spec.Clients) && s.allCutEnded() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res := s.result()
	s.probeResult(&res)
	return enc.Encode(res)
}

// allCutEnded says whether every watch the storm cuts has seen it.
func (s *stormClient) allCutEnded() bool {
	for _, w := range s.watchers {
		w.mu.Lock()
		waiting := w.cut && w.endedAt.IsZero()
		w.mu.Unlock()
		if waiting {
			return false
		}
	}
	return true
}

func (s *stormClient) result() watchResult {
	mark, _ := s.marked()
	res := watchResult{Clients: s.spec.Clients, Failed: s.failed.Load(), FirstError: s.firstError(), FailedBy: s.failures(),
		Lost: s.lost.Load(), Stalled: s.stalled.Load(), Shares: make([]int, 3)}
	var took []float64
	for _, w := range s.watchers {
		w.mu.Lock()
		if !w.endedAt.IsZero() {
			res.Disrupted++
			if !w.backAt.IsZero() {
				res.Recovered++
				took = append(took, float64(w.backAt.Sub(mark).Microseconds())/1e3)
			}
		}
		if b := w.backend; b >= 1 && b <= len(res.Shares) {
			res.Shares[b-1]++
		}
		w.mu.Unlock()
	}
	if len(took) > 0 {
		slices.Sort(took)
		res.P50ms, res.P99ms, res.MaxMs = quantile(took, 0.5), quantile(took, 0.99), took[len(took)-1]
	}
	return res
}
