// Package health runs the active health checks of the backends: one
// goroutine per backend probes it on a ticker and reports each result as
// passed, failed or a local fault. It keeps no verdict: the pool's state
// machine (package balance) counts the results and decides.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// Target is one backend to check. Two targets are the same target when
// both name and address are equal.
type Target struct {
	Name    string
	Address string
}

// Status is the checker's view of one target: its latest check. What the
// results mean for the backend (up, down...) is the pool's to decide.
type Status struct {
	Name, Address string
	LastError     string // empty after a successful check
	// Unverified says why the latest check passed without verifying
	// readiness (see Unverified); empty when it verified it or failed.
	Unverified  string
	LastCheck   time.Time
	LastLatency time.Duration
}

// Outcome is what one check says.
type Outcome uint8

// The outcomes of a check.
const (
	// Pass: the check passed (verified or, see Unverified, not).
	Pass Outcome = iota
	Fail
	// LocalFault: the check failed for a reason of this host (out of
	// descriptors or memory, see balance.LocalFault). It says nothing
	// about the backend and must not count against it.
	LocalFault
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "passed"
	case Fail:
		return "failed"
	case LocalFault:
		return "local-fault"
	}
	return "invalid"
}

// Result is one check result, reported for every check in order per
// target: the pool's state machine counts them.
type Result struct {
	Target  Target
	Outcome Outcome
	Err     error // nil when passed, or an *Unverified pass
	Latency time.Duration
}

// Checker checks every target concurrently, one goroutine per target.
type Checker struct {
	onResult func(Result)

	mu      sync.Mutex
	log     *slog.Logger
	cfg     config.Health
	prober  Prober
	targets map[Target]*target
	order   []Target        // SetTargets order, for Snapshot
	runCtx  context.Context // nil until Run starts
	wg      *sync.WaitGroup // the target goroutines of the current Run
	result  chan struct{}   // closed and replaced on every result
	running bool
}

// target is the state of one checked backend; guarded by Checker.mu.
type target struct {
	Target
	status   Status
	checked  bool
	local    bool      // the latest check failed for a local reason
	warned   bool      // the unverified warning was logged for this target
	activity time.Time // start of the goroutine or end of its last check
	stop     context.CancelFunc
}

// New returns a checker for cfg using prober. onResult, if not nil, is
// called from the target's goroutine for every result, in order per target.
func New(cfg config.Health, prober Prober, onResult func(Result)) *Checker {
	return &Checker{
		onResult: onResult,
		log:      slog.Default(),
		cfg:      cfg,
		prober:   prober,
		targets:  map[Target]*target{},
		result:   make(chan struct{}),
	}
}

// SetLogger sets where local faults and, at debug, each check are logged
// (default slog.Default()).
func (c *Checker) SetLogger(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = log
}

// SetConfig swaps the health settings and the prober (on reload). A new
// interval applies from the next tick, a new prober from the next check.
func (c *Checker) SetConfig(cfg config.Health, prober Prober) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg, c.prober = cfg, prober
	for _, t := range c.targets {
		t.warned = false // a new config that still cannot verify says so again
	}
}

// SetTargets replaces the set of targets. Unchanged targets keep their
// status and their goroutine; new ones are checked at once; removed ones
// stop.
func (c *Checker) SetTargets(targets []Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := make(map[Target]bool, len(targets))
	c.order = c.order[:0]
	for _, tg := range targets {
		if keep[tg] {
			continue // a duplicate would only be checked twice
		}
		keep[tg] = true
		c.order = append(c.order, tg)
		if _, ok := c.targets[tg]; !ok {
			c.addLocked(tg)
		}
	}
	for tg, t := range c.targets {
		if !keep[tg] {
			if t.stop != nil {
				t.stop()
			}
			delete(c.targets, tg)
		}
	}
	// Removing a target can complete the first round.
	c.notifyLocked()
}

func (c *Checker) addLocked(tg Target) {
	now := time.Now()
	t := &target{
		Target:   tg,
		status:   Status{Name: tg.Name, Address: tg.Address},
		activity: now,
	}
	c.targets[tg] = t
	if c.running {
		c.startLocked(t)
	}
}

func (c *Checker) startLocked(t *target) {
	ctx, stop := context.WithCancel(c.runCtx)
	t.stop = stop
	t.activity = time.Now()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.loop(ctx, t)
	}()
}

// Run checks the targets until ctx is done, then waits for every check
// goroutine to stop.
func (c *Checker) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg := &sync.WaitGroup{}
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return
	}
	c.running, c.runCtx, c.wg = true, ctx, wg
	for _, t := range c.targets {
		c.startLocked(t)
	}
	c.mu.Unlock()

	<-ctx.Done()
	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
	wg.Wait()
}

// loop is the goroutine of one target: a check at once (so the first round
// is quick), then a random pause so backends drift out of lockstep, then a
// check every interval.
func (c *Checker) loop(ctx context.Context, t *target) {
	c.check(ctx, t)
	interval := c.interval()
	jitter := time.NewTimer(rand.N(interval))
	select {
	case <-ctx.Done():
		jitter.Stop()
		return
	case <-jitter.C:
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		c.check(ctx, t)
		if now := c.interval(); now != interval {
			interval = now
			ticker.Reset(interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (c *Checker) interval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.cfg.Interval.Duration, 10*time.Millisecond)
}

// check probes t once and reports the result: first to onResult, then to
// the waiters, so that one woken by it sees what onResult made of it.
func (c *Checker) check(ctx context.Context, t *target) {
	c.mu.Lock()
	prober, timeout, log := c.prober, c.cfg.Timeout.Duration, c.log
	c.mu.Unlock()
	if timeout <= 0 {
		timeout = time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	err := prober.Probe(pctx, t.Address)
	latency := time.Since(start)
	cancel()
	if ctx.Err() != nil {
		return // stopped or removed while probing: the result means nothing
	}
	r := Result{Target: t.Target, Outcome: outcome(err), Err: err, Latency: latency}
	first, ok := c.record(t, r, start.Add(latency))
	if !ok {
		return
	}
	switch {
	case r.Outcome == LocalFault && first:
		log.Log(ctx, slog.LevelWarn, "health check failed for a local reason; not counted against the backend", "backend", t.Name,
			"address", t.Address, "err", err)
	case IsUnverified(err) && first:
		log.Log(ctx, slog.LevelWarn, "backend readiness unverified: it refuses a check without credentials (anonymous auth off), so the check only shows that it answers HTTP over TLS; fix: "+UnverifiedFix,
			"backend", t.Name, "address", t.Address, "err", err)
	case log.Enabled(ctx, slog.LevelDebug):
		log.Debug("check", "backend", t.Name, "outcome", r.Outcome.String(), "latency", latency, "err", err)
	}
	if c.onResult != nil {
		c.onResult(r)
	}
	c.mu.Lock()
	t.checked = t.checked || r.Outcome != LocalFault
	c.notifyLocked()
	c.mu.Unlock()
}

// outcome is what a probe's error says about the backend.
func outcome(err error) Outcome {
	switch {
	case Passed(err):
		return Pass
	case balance.LocalFault(err):
		return LocalFault
	default:
		return Fail
	}
}

// record sets t's status from r. ok is false when t was removed meanwhile;
// first says r is the first of a run of local faults, or t's first
// unverified pass: each is logged once (every interval would flood the
// journal).
func (c *Checker) record(t *target, r Result, at time.Time) (first, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.targets[t.Target] != t {
		return false, false
	}
	t.status.LastCheck = at
	t.status.LastLatency = r.Latency
	t.status.LastError, t.status.Unverified = "", ""
	switch {
	case r.Outcome == LocalFault:
		t.status.LastError = "local: " + r.Err.Error()
		first = !t.local
	case IsUnverified(r.Err):
		t.status.Unverified = r.Err.Error()
		first, t.warned = !t.warned, true
	case r.Outcome == Fail:
		t.status.LastError = r.Err.Error()
	}
	t.local = r.Outcome == LocalFault
	t.activity = time.Now()
	return first, true
}

func (c *Checker) notifyLocked() {
	close(c.result)
	c.result = make(chan struct{})
}

// WaitUsable returns once usable() holds or every target has a result
// (a local fault is none), or with ctx's error: a backend that is down
// and slow to time out must not hold up a proxy that can already serve
// through the others. usable is asked after every result, once onResult
// has seen it (the daemon passes "the pool has a healthy backend").
func (c *Checker) WaitUsable(ctx context.Context, usable func() bool) error {
	return c.wait(ctx, "a healthy backend or the first round of health checks", func() bool {
		if usable() {
			return true
		}
		for _, t := range c.targets {
			if !t.checked {
				return false
			}
		}
		return true
	})
}

// wait blocks until done, called under c.mu after every result, holds.
func (c *Checker) wait(ctx context.Context, what string, done func() bool) error {
	for {
		c.mu.Lock()
		ok := done()
		wake := c.result
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-wake:
		}
	}
}

// Snapshot returns the status of every target in SetTargets order.
func (c *Checker) Snapshot() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, 0, len(c.order))
	for _, tg := range c.order {
		if t, ok := c.targets[tg]; ok {
			out = append(out, t.status)
		}
	}
	return out
}

// minAliveWindow is the least time without progress before Alive says no.
const minAliveWindow = 20 * time.Second

// Alive reports whether Run is running and every target's goroutine made
// progress lately: within three intervals plus one timeout (a probe may
// legitimately take that long), and never less than minAliveWindow. The
// watchdog pings only while it holds.
func (c *Checker) Alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return false
	}
	// A hung check loop is what the watchdog is for; a starved one (a
	// busy node, a TCG VM) is not: never call a loop dead under 20 s.
	window := max(3*max(c.cfg.Interval.Duration, 10*time.Millisecond)+c.cfg.Timeout.Duration, minAliveWindow)
	now := time.Now()
	for _, t := range c.targets {
		if now.Sub(t.activity) > window {
			return false
		}
	}
	return true
}
