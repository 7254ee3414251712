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

// Status is the checker's view of one target.
type Status struct {
	Name, Address string
	State         State
	LastError     string // empty after a successful check
	// Unverified says why the latest check passed without verifying
	// readiness (see Unverified); empty when it verified it or failed.
	Unverified  string
	LastCheck   time.Time
	LastLatency time.Duration
	Since       time.Time // when State began
}

// Event is one check result. It is emitted for every result so the
// daemon can count checks and update metrics; Changed tells a transition.
type Event struct {
	Target   Target
	From, To State
	Reason   string
	Latency  time.Duration
	OK       bool
	Err      error
	// Local: the check failed for a reason of this host (out of
	// descriptors or memory, see balance.LocalFault). It says nothing
	// about the backend: the state machine did not see it, From == To.
	Local bool
}

// Changed reports whether this result moved the target to another state.
func (e Event) Changed() bool { return e.From != e.To }

// Checker checks every target concurrently, one goroutine per target.
type Checker struct {
	onEvent func(Event)

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
	machine  Machine
	status   Status
	checked  bool
	local    bool      // the latest check failed for a local reason
	warned   bool      // the unverified warning was logged for this target
	activity time.Time // start of the goroutine or end of its last check
	stop     context.CancelFunc
}

// New returns a checker for cfg using prober. onEvent, if not nil, is
// called from the target's goroutine for every result, in order per target.
func New(cfg config.Health, prober Prober, onEvent func(Event)) *Checker {
	return &Checker{
		onEvent: onEvent,
		log:     slog.Default(),
		cfg:     cfg,
		prober:  prober,
		targets: map[Target]*target{},
		result:  make(chan struct{}),
	}
}

// SetLogger sets where transitions are logged (default slog.Default()).
func (c *Checker) SetLogger(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = log
}

// SetConfig swaps the health settings and the prober (on reload). The
// targets keep their state; new thresholds apply from the next result and
// a new interval from the next tick.
func (c *Checker) SetConfig(cfg config.Health, prober Prober) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg, c.prober = cfg, prober
	for _, t := range c.targets {
		t.machine.Rise, t.machine.Fall = cfg.Rise, cfg.Fall
		t.warned = false // a new config that still cannot verify says so again
	}
}

// SetTargets replaces the set of targets. Unchanged targets keep their
// state and their goroutine; new ones start in Unknown; removed ones stop.
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
		machine:  Machine{Rise: c.cfg.Rise, Fall: c.cfg.Fall},
		status:   Status{Name: tg.Name, Address: tg.Address, State: Unknown, Since: now},
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

// check probes t once, records the result and reports it.
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
	if balance.LocalFault(err) {
		c.local(ctx, log, t, err, start.Add(latency), latency)
		return
	}
	ev, warn, ok := c.record(t, err, start.Add(latency), latency)
	if !ok {
		return
	}
	if warn {
		log.Log(ctx, slog.LevelWarn, "backend readiness unverified: it refuses a check without credentials (anonymous auth off), so the check only shows that it answers HTTP over TLS; fix: "+CredentialsFix,
			"backend", t.Name, "address", t.Address, "err", err)
	}
	if ev.Changed() {
		level := slog.LevelInfo
		if ev.To == Down {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "backend "+ev.To.String(), "backend", t.Name, "address", t.Address,
			"from", ev.From.String(), "to", ev.To.String(), "reason", ev.Reason)
	} else if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("check", "backend", t.Name, "ok", ev.OK, "state", ev.To.String(), "latency", latency, "err", err)
	}
	if c.onEvent != nil {
		c.onEvent(ev)
	}
}

// record feeds one result into t's machine. ok is false when t was
// removed meanwhile; warn is true for t's first unverified pass.
func (c *Checker) record(t *target, err error, at time.Time, latency time.Duration) (ev Event, warn, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.targets[t.Target] != t {
		return Event{}, false, false
	}
	from := t.machine.State()
	passed := Passed(err)
	changed := t.machine.Observe(passed)
	ev = Event{Target: t.Target, From: from, To: t.machine.State(), Latency: latency, OK: passed, Err: err}
	ev.Reason = reason(ev, t.machine.Streak())
	t.status.State = ev.To
	t.status.LastCheck = at
	t.status.LastLatency = latency
	t.status.LastError, t.status.Unverified = "", ""
	switch {
	case IsUnverified(err):
		t.status.Unverified = err.Error()
		warn, t.warned = !t.warned, true
	case err != nil:
		t.status.LastError = err.Error()
	}
	if changed {
		t.status.Since = at
	}
	t.checked = true
	t.local = false
	t.activity = time.Now()
	c.notifyLocked()
	return ev, warn, true
}

// local handles a check that failed for a local reason: the machine does
// not see it, so the state stays what the last real result made it. The
// log says so once per run of them (every interval would flood the journal).
func (c *Checker) local(ctx context.Context, log *slog.Logger, t *target, err error, at time.Time, latency time.Duration) {
	c.mu.Lock()
	if c.targets[t.Target] != t {
		c.mu.Unlock()
		return
	}
	state := t.machine.State()
	first := !t.local
	t.local = true
	t.status.LastCheck = at
	t.status.LastLatency = latency
	t.status.LastError = "local: " + err.Error()
	t.activity = time.Now()
	c.mu.Unlock()
	if first {
		log.Log(ctx, slog.LevelWarn, "health check failed for a local reason; not counted against the backend", "backend", t.Name,
			"address", t.Address, "state", state.String(), "err", err)
	}
	if c.onEvent != nil {
		c.onEvent(Event{Target: t.Target, From: state, To: state, Latency: latency, Err: err, Local: true,
			Reason: "check failed for a local reason: " + err.Error()})
	}
}

// reason explains a result in words, transitions in particular.
func reason(ev Event, streak int) string {
	switch {
	case ev.From == Unknown && ev.OK:
		return "first check succeeded"
	case ev.From == Unknown:
		return "first check failed: " + ev.Err.Error()
	case ev.Changed() && ev.OK:
		return fmt.Sprintf("%d consecutive successful checks", streak)
	case ev.Changed():
		return fmt.Sprintf("%d consecutive failed checks, last: %v", streak, ev.Err)
	case ev.OK:
		return "check succeeded"
	default:
		return "check failed: " + ev.Err.Error()
	}
}

func (c *Checker) notifyLocked() {
	close(c.result)
	c.result = make(chan struct{})
}

// WaitUsable returns once a target is up or every target has a result,
// or with ctx's error: a backend that is down and slow to time out must
// not hold up a proxy that can already serve through the others.
func (c *Checker) WaitUsable(ctx context.Context) error {
	return c.wait(ctx, "a healthy backend or the first round of health checks", func() bool {
		all := true
		for _, t := range c.targets {
			if t.status.State == Up {
				return true
			}
			all = all && t.checked
		}
		return all
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
