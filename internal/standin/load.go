package standin

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/service/atomicfile"
)

// LoadSpec is what `vipproxy-apiserver load` holds and opens through one
// address (a VIP): Watches /watch streams of stand-in apiservers, each
// reconnected when it ends, as a reflector does, and, once every watch
// has streamed, one new connection (a full handshake and GET /name) every
// ConnectEvery, whether or not the ones before have been answered: a
// connection waiting in a listener's queue does not hold the next one back.
type LoadSpec struct {
	Target       string
	TLS          *tls.Config
	Watches      int
	ConnectEvery time.Duration
	// Timeout bounds a connection's dial, handshake and answer, and a
	// watch's silence: only a hang reaches it.
	Timeout time.Duration
	// Ramp is how many watches may be connecting at once while they start.
	Ramp int
}

// LoadReport is one window of a load run (from its start or the previous
// report to this one), written as JSON.
type LoadReport struct {
	Window  int     `json:"window"`
	From    float64 `json:"from"` // Unix seconds
	To      float64 `json:"to"`
	Watches int     `json:"watches"`
	Up      int     `json:"up"` // watches streaming at the report
	// Cut counts the watch streams that ended in the window, CutBy by
	// cause; Corrupt the lines out of sequence (a stream that lost or
	// repeated bytes).
	Cut     int64            `json:"cut"`
	CutBy   map[string]int64 `json:"cut_by,omitempty"`
	Corrupt int64            `json:"corrupt"`
	Events  int64            `json:"events"`
	// The longest silence of each watch in the window (between two events,
	// a reconnection included): its distribution over the watches.
	GapP50ms float64 `json:"gap_p50_ms"`
	GapP99ms float64 `json:"gap_p99_ms"`
	GapMaxms float64 `json:"gap_max_ms"`
	// New connections answered in the window: dial to the answer's
	// first line (connect, handshake, request, first byte).
	Connections int64   `json:"connections"`
	Failed      int64   `json:"failed"`
	FirstError  string  `json:"first_error,omitempty"`
	DelayP50ms  float64 `json:"delay_p50_ms"`
	DelayP99ms  float64 `json:"delay_p99_ms"`
	DelayMaxms  float64 `json:"delay_max_ms"`
	InFlight    int64   `json:"in_flight"`
	// OldestEvent is the earliest of the watches' latest events (Unix
	// seconds; 0 while a watch is down): every watch has streamed since.
	OldestEvent float64 `json:"oldest_event"`
	// LastAnswered is the start (Unix seconds) of the latest new
	// connection answered.
	LastAnswered float64 `json:"last_answered"`
}

// loadWatch is one watch's state.
type loadWatch struct {
	mu     sync.Mutex
	up     bool
	last   time.Time     // the latest event, kept across reconnections
	maxGap time.Duration // in this window
}

// loadRun is a running load: the counters of the current window.
type loadRun struct {
	spec     LoadSpec
	host     string
	watches  []*loadWatch
	events   atomic.Int64
	corrupt  atomic.Int64
	inFlight atomic.Int64

	mu       sync.Mutex
	window   int
	from     time.Time
	cutBy    map[string]int64
	delays   []time.Duration
	failed   int64
	first    string
	answered time.Time
}

func newLoadRun(spec LoadSpec) (*loadRun, error) {
	host, _, err := net.SplitHostPort(spec.Target)
	if err != nil {
		return nil, fmt.Errorf("load target %q: %w", spec.Target, err)
	}
	if spec.TLS.ServerName == "" {
		spec.TLS = spec.TLS.Clone()
		spec.TLS.ServerName = host
	}
	r := &loadRun{spec: spec, host: host, from: time.Now(), cutBy: map[string]int64{}}
	for range spec.Watches {
		r.watches = append(r.watches, &loadWatch{})
	}
	return r, nil
}

// RunLoad runs spec until ctx ends. It writes the current window's figures
// to status every 500 ms; a receive on next (SIGUSR1 in the command)
// closes the window, writes it to report and starts the next.
func RunLoad(ctx context.Context, spec LoadSpec, next <-chan os.Signal, status, report string) error {
	r, err := newLoadRun(spec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ramp := make(chan struct{}, max(spec.Ramp, 1))
	for _, w := range r.watches {
		wg.Go(func() { r.watch(ctx, w, ramp) })
	}
	wg.Go(func() { r.connectLoop(ctx) })
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := writeJSON(status, r.report(false)); err != nil {
				return err
			}
		case <-next:
			if err := writeJSON(report, r.report(true)); err != nil {
				return err
			}
		}
	}
}

// watch keeps one watch streaming until ctx ends: a stream that ends is
// counted and started again after a second.
func (r *loadRun) watch(ctx context.Context, w *loadWatch, ramp chan struct{}) {
	for ctx.Err() == nil {
		err := r.stream(ctx, w, ramp)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		wasUp := w.up
		w.up = false
		w.mu.Unlock()
		if wasUp {
			r.count(func() { r.cutBy[loadCause(err)]++ })
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// stream opens one /watch and reads its lines ("name seq", seq from 0)
// until it ends; the error says why.
func (r *loadRun) stream(ctx context.Context, w *loadWatch, ramp chan struct{}) error {
	ramp <- struct{}{}
	c, br, err := r.request(ctx, "/watch")
	<-ramp
	if err != nil {
		return err
	}
	defer c.Close()
	w.mu.Lock()
	w.up = true
	w.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	body := bufio.NewReader(br)
	for want := 0; ; want++ {
		c.SetReadDeadline(time.Now().Add(r.spec.Timeout))
		line, err := body.ReadString('\n')
		if err != nil {
			return err
		}
		now := time.Now()
		f := strings.Fields(line)
		if len(f) != 2 || f[1] != strconv.Itoa(want) {
			r.corrupt.Add(1)
			return fmt.Errorf("line %d: %.40q out of sequence", want, line)
		}
		r.events.Add(1)
		w.mu.Lock()
		if !w.last.IsZero() {
			w.maxGap = max(w.maxGap, now.Sub(w.last))
		}
		w.last = now
		w.mu.Unlock()
	}
}

// request dials the target, makes a full handshake and sends GET path; it
// returns the connection and the response body once its head is read.
func (r *loadRun) request(ctx context.Context, path string) (*tls.Conn, io.Reader, error) {
	d := net.Dialer{Timeout: r.spec.Timeout}
	raw, err := d.DialContext(ctx, "tcp", r.spec.Target)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	c := tls.Client(raw, r.spec.TLS)
	c.SetDeadline(time.Now().Add(r.spec.Timeout))
	if err := c.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, r.host); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("send request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, nil, fmt.Errorf("answer: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return c, resp.Body, nil
}

// connectLoop starts one new connection every ConnectEvery, each in its
// own goroutine, once every watch has streamed: under TCG the watches'
// handshakes at the start queued the new connections for 14 s (p50; 1,000
// watches and one every 100 ms, 2026-12-06).
func (r *loadRun) connectLoop(ctx context.Context) {
	for !r.allStreamed() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(r.spec.ConnectEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Bounded: a target that stopped answering holds at most a
		// Timeout's worth of attempts.
		if r.inFlight.Load() > int64(r.spec.Timeout/r.spec.ConnectEvery)+1 {
			continue
		}
		r.inFlight.Add(1)
		wg.Go(func() {
			defer r.inFlight.Add(-1)
			r.connectOnce(ctx)
		})
	}
}

// allStreamed says whether every watch has had an event.
func (r *loadRun) allStreamed() bool {
	for _, w := range r.watches {
		w.mu.Lock()
		streamed := !w.last.IsZero()
		w.mu.Unlock()
		if !streamed {
			return false
		}
	}
	return true
}

// connectOnce makes one new connection: GET /name, its answer read whole.
func (r *loadRun) connectOnce(ctx context.Context) {
	start := time.Now()
	c, body, err := r.request(ctx, "/name")
	took := time.Since(start)
	if err == nil {
		_, err = io.ReadAll(body)
		c.Close()
	}
	if ctx.Err() != nil {
		return
	}
	r.count(func() {
		if err != nil {
			r.failed++
			if r.first == "" {
				r.first = err.Error()
			}
			return
		}
		r.delays = append(r.delays, took)
		if start.After(r.answered) {
			r.answered = start
		}
	})
}

func (r *loadRun) count(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// loadCause names why a watch stream ended.
func loadCause(err error) string {
	switch {
	case err == nil:
		return "ended"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "silent"
	case strings.Contains(err.Error(), "out of sequence"):
		return "out of sequence"
	}
	return "other"
}

// report is the current window's figures; with next, the window closes
// and the next one starts.
func (r *loadRun) report(next bool) LoadReport {
	now := time.Now()
	rep := LoadReport{Watches: len(r.watches), Events: r.events.Load(), Corrupt: r.corrupt.Load(), InFlight: r.inFlight.Load(), To: unixSeconds(now)}
	gaps := make([]time.Duration, 0, len(r.watches))
	oldest := now
	for _, w := range r.watches {
		w.mu.Lock()
		if w.up {
			rep.Up++
		}
		if !w.up || w.last.IsZero() {
			oldest = time.Time{}
		} else if !oldest.IsZero() && w.last.Before(oldest) {
			oldest = w.last
		}
		gaps = append(gaps, w.maxGap)
		if next {
			w.maxGap = 0
		}
		w.mu.Unlock()
	}
	rep.OldestEvent = unixSeconds(oldest)
	rep.GapP50ms, rep.GapP99ms, rep.GapMaxms = percentiles(gaps)
	r.mu.Lock()
	defer r.mu.Unlock()
	rep.Window, rep.From = r.window, unixSeconds(r.from)
	rep.CutBy = make(map[string]int64, len(r.cutBy))
	for k, v := range r.cutBy {
		rep.CutBy[k] = v
		rep.Cut += v
	}
	rep.Connections, rep.Failed, rep.FirstError = int64(len(r.delays)), r.failed, r.first
	rep.DelayP50ms, rep.DelayP99ms, rep.DelayMaxms = percentiles(r.delays)
	rep.LastAnswered = unixSeconds(r.answered)
	if next {
		r.window++
		r.from = now
		r.cutBy, r.delays, r.failed, r.first = map[string]int64{}, nil, 0, ""
		r.events.Store(0)
		r.corrupt.Store(0)
	}
	return rep
}

// percentiles are the 50th and 99th percentiles (nearest rank) and the
// maximum of ds, in milliseconds.
func percentiles(ds []time.Duration) (p50, p99, maxMs float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return float64(s[min(max(i, 0), len(s)-1)].Microseconds()) / 1e3
	}
	return at(0.5), at(0.99), at(1)
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1e6
}

// writeJSON replaces path with v as JSON (a reader never sees half).
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
