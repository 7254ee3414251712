// Package daemon wires vipproxy together: config, listeners, pool, health
// checks, proxy, admin endpoint and the systemd protocol. It owns the life
// cycle: start, READY, reload on SIGHUP, drain and exit on cancellation.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/health"
	"github.com/vipproxy/vipproxy/service/listen"
	"github.com/vipproxy/vipproxy/service/logging"
	"github.com/vipproxy/vipproxy/service/metrics"
	"github.com/vipproxy/vipproxy/service/netcfg"
	"github.com/vipproxy/vipproxy/service/notify"
	"github.com/vipproxy/vipproxy/service/portowner"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// Daemon is one running vipproxy.
type Daemon struct {
	version  string
	log      *slog.Logger
	level    *slog.LevelVar
	notifier *notify.Notifier
	metrics  *metrics.Metrics
	pool     *balance.Pool
	checker  *health.Checker
	proxy    *proxy.Proxy
	ready    atomic.Bool // READY sent and not stopping
	control  string      // control socket path ("" : none), see admin.ControlSocketName
	hup      <-chan os.Signal

	// cfg is the config in force: read without a lock anywhere, swapped
	// whole by a reload (apply).
	cfg atomic.Pointer[config.Valid]

	mu         sync.Mutex
	reloadErr  string
	adminErr   string // why admin.listen does not serve; "" when it does
	reloads    uint64 // reloads done, accepted or refused
	lastReload time.Time
	retired    []*balance.Backend // removed by a reload, draining

	// Discovery (see discovery.go). setMu serialises changes of the
	// backend set; members, sources and discoveryErrors are under mu.
	bg                 context.Context // lives until the daemon returns
	finder             *finder         // nil when discovery is off; set by the loop, under mu
	setMu              sync.Mutex
	members            []discovery.Member
	sources            map[string]discovery.Source
	drainedByDiscovery map[string]bool // under setMu
	discoveryErrors    uint64
}

// Run loads the config at path and serves until ctx is cancelled, then
// drains. A config error is returned as a *config.Error.
func Run(ctx context.Context, path, version string, stderr io.Writer) error {
	// SIGHUP is a reload from the first moment: Go's default for it is to
	// exit, and one that came before the loop (a reload right after READY,
	// or during a slow start) ended the daemon. The loop reloads for it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level.Slog())
	log := logging.New(stderr, level, os.Getenv("JOURNAL_STREAM"))
	d := &Daemon{version: version, log: log, level: level, notifier: notify.New(log), lastReload: time.Now(),
		control: admin.ControlSocketPath(os.Getenv), hup: hup}
	d.cfg.Store(cfg)
	return d.run(ctx)
}

func (d *Daemon) run(ctx context.Context) error {
	cfg := d.cfg.Load()
	d.metrics = metrics.New()
	d.metrics.SetBuild(d.version)
	d.metrics.SetVIPHeld(d.heldVIPs)
	for _, r := range listen.Reasons() {
		d.metrics.AcceptErrors.WithLabelValues(r) // at 0 before the first error
	}
	d.drainedByDiscovery = map[string]bool{}
	d.finder = d.newFinder(cfg)
	if d.finder != nil {
		d.members = d.finder.w.Members() // the last known set, until the first list
	}
	initial, _, _ := backendSet(cfg.Backends, d.members)
	pool, err := balance.NewPool(cfg.Balance.Algorithm, initial, d.backendMetrics)
	if err != nil {
		return err
	}
	d.pool = pool
	pool.SetThresholds(thresholds(cfg.Health))
	pool.SetObserver(d.onTransition)
	prober, err := health.NewProber(cfg.Health, ownAddrs(cfg)...)
	if err != nil {
		return withFile(err, cfg.Path)
	}
	listeners, err := listen.Open(ctx, cfg.VIP.Addresses, cfg.ServedPorts())
	if err != nil {
		return d.bindFailed(err, cfg)
	}
	defer listeners.Close()

	bg, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	d.bg = bg
	// The proxy exists before the first health result arrives: onHealth
	// reads its connection count.
	d.proxy = proxy.New(pool, proxyOptions(cfg, d.applyMaxConnections(cfg)), d.proxyCounters(), d.log)
	d.checker = health.New(cfg.Health, prober, d.onHealth)
	d.checker.SetLogger(d.log)
	d.applyBackends()
	go d.checker.Run(bg)
	if d.finder != nil {
		d.finder.start(bg)
	}
	defer func() { d.finder.close() }()

	for _, note := range listeners.Notes {
		d.log.Warn(note)
	}
	if err := d.proxy.Start(listeners.Ports[cfg.ServedPorts()[0].Name]); err != nil {
		return err
	}
	defer d.proxy.Close()
	if err := d.startAdmin(bg, cfg, listeners.Admin); err != nil {
		d.proxy.StopAccepting()
		return err
	}
	d.waitUsable(ctx, cfg)
	d.log.Info("serving", "listeners", addrs(listeners), "activated", listeners.Activated,
		"backends", len(pool.Backends()), "discovery", cfg.Discovery.Enable, "algorithm", cfg.Balance.Algorithm, "check", cfg.Health.Type)
	d.ready.Store(true)
	d.notifier.Ready(d.statusLine())
	go d.notifier.Watchdog(bg, d.alive)
	return d.loop(ctx)
}

// bindFailed names who holds the VIP port and the fix when the listener
// cannot bind (a local apiserver on *:6443, most often), in the error, the
// log and STATUS=.
func (d *Daemon) bindFailed(err error, cfg *config.Valid) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		if why := portowner.Explain("/proc", cfg.VIP.Addresses, cfg.VIP.Port); why != "" {
			err = fmt.Errorf("%w: %s", err, why)
		}
	}
	d.notifier.Status("VIP listener: " + err.Error())
	return err
}

// loop handles reloads and status updates until ctx is done.
func (d *Daemon) loop(ctx context.Context) error {
	status := time.NewTicker(5 * time.Second)
	defer status.Stop()
	// Reloads run on a goroutine of their own: a config read that hangs
	// must not keep this loop from handling SIGTERM. SIGHUPs that come
	// during a reload make one more reload after it.
	reloads := make(chan struct{}, 1)
	rctx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	go d.reloader(rctx, reloads)
	for {
		select {
		case <-ctx.Done():
			return d.shutdown()
		case <-d.hup:
			select {
			case reloads <- struct{}{}:
			default: // one is pending already
			}
		case <-status.C:
			d.notifier.Status(d.statusLine())
		case <-d.proxy.Stopped():
			return fmt.Errorf("accept loop ended: %w", d.proxy.Err())
		}
	}
}

// reloader reloads once per request until ctx is done.
func (d *Daemon) reloader(ctx context.Context, requests <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-requests:
			d.reload()
		}
	}
}

// waitUsable holds READY (and /readyz) until a backend is healthy or every
// backend has a check result, bounded so a slow check cannot hold the start
// forever. A dead backend's check timeout must not hold up a restart: the
// listener is serving already, and keepalived's probe reads /readyz.
func (d *Daemon) waitUsable(ctx context.Context, cfg *config.Valid) {
	wctx, cancel := context.WithTimeout(ctx, cfg.Health.Timeout.Duration+cfg.Health.Interval.Duration+time.Second)
	defer cancel()
	if err := d.checker.WaitUsable(wctx, d.anyServing); err != nil {
		d.log.Warn("no health check result yet; ready anyway", "err", err)
	}
}

// shutdown stops accepting, lets open connections finish up to the drain
// timeout, closing those that stay idle for timeouts.drain_idle meanwhile,
// then closes the rest.
func (d *Daemon) shutdown() error {
	cfg := d.cfg.Load()
	drain, drainIdle := cfg.Timeouts.Drain.Duration, cfg.Timeouts.DrainIdle.Duration
	d.ready.Store(false)
	open := d.proxy.Open()
	d.notifier.Stopping(fmt.Sprintf("draining %d connections", open))
	d.log.Info("stopping: no longer accepting, draining", "open", open, "timeout", drain, "close_idle_after", drainIdle)
	d.proxy.StopAccepting()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if drainIdle > 0 {
		go d.closeIdle(ctx, drainIdle)
	}
	if d.proxy.Drain(ctx) {
		d.log.Info("drained", "open", 0)
		return nil
	}
	closed := 0
	for _, b := range d.allBackends() {
		closed += b.CloseAll()
	}
	d.log.Warn("drain timeout: closed remaining connections", "closed", closed)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	d.proxy.Drain(ctx2)
	return nil
}

// idler is a connection that can tell whether it is idle (proxy session).
type idler interface {
	IdleMark() (mark uint64, idle bool)
}

// idleLook is when a connection was first seen idle with a given mark.
type idleLook struct {
	mark  uint64
	since time.Time
}

// closeIdle closes, until ctx ends, every connection that stays idle (no
// byte either way) for idleFor: a watch or an idle keep-alive connection
// would otherwise hold the drain, and with it the restart, to its end.
func (d *Daemon) closeIdle(ctx context.Context, idleFor time.Duration) {
	seen := map[balance.Conn]idleLook{}
	tick := time.NewTicker(min(max(idleFor/4, 50*time.Millisecond), 500*time.Millisecond))
	defer tick.Stop()
	for {
		if closed := d.closeIdleOnce(seen, idleFor, time.Now()); closed > 0 {
			d.log.Info("draining: closed idle connections", "closed", closed, "idle_for", idleFor, "open", d.proxy.Open())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// closeIdleOnce looks at every connection once: one idle with the same
// mark since idleFor ago is closed; seen remembers the others.
func (d *Daemon) closeIdleOnce(seen map[balance.Conn]idleLook, idleFor time.Duration, now time.Time) (closed int) {
	for _, b := range d.allBackends() {
		for _, c := range b.Conns() {
			ic, ok := c.(idler)
			if !ok {
				continue
			}
			mark, idle := ic.IdleMark()
			prev, known := seen[c]
			switch {
			case !idle:
				delete(seen, c)
			case !known || prev.mark != mark:
				seen[c] = idleLook{mark, now}
			case now.Sub(prev.since) >= idleFor:
				c.Close()
				delete(seen, c)
				closed++
			}
		}
	}
	return closed
}

func (d *Daemon) allBackends() []*balance.Backend {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append(slices.Clone(d.pool.Backends()), d.retired...)
}

// onHealth feeds a health check result to the pool's state machine and
// the metrics. A check that failed for a local reason is only counted.
func (d *Daemon) onHealth(r health.Result) {
	if r.Outcome == health.LocalFault {
		d.metrics.ObserveLocalCheck(r.Target.Name)
		return
	}
	d.metrics.ObserveCheck(r.Target.Name, r.Outcome == health.Pass, r.Latency)
	d.metrics.SetUnverified(r.Target.Name, health.IsUnverified(r.Err))
	b := d.pool.Lookup(r.Target.Name)
	if b == nil || b.Address != r.Target.Address {
		return
	}
	e, failure := balance.CheckPassed, error(nil)
	if r.Outcome == health.Fail {
		e, failure = balance.CheckFailed, r.Err
	}
	tr := d.pool.Observe(b, e)
	d.logTransition(tr, failure)
	if tr.Changed() && tr.To == balance.Down && tr.From != balance.Recovering && !tr.Panic {
		d.evacuateLater(b)
	}
	if tr.Changed() || tr.PanicChanged {
		d.notifier.Status(d.statusLine())
	}
}

// logTransition says, once, that a check result took a backend up or
// down. Recovering counts as still down: a backend that alternates between
// passing and failing checks while down does not flood the journal.
func (d *Daemon) logTransition(tr balance.Transition, err error) {
	up := tr.To == balance.Up
	down := tr.To == balance.Down && tr.From != balance.Recovering
	if !tr.Changed() || !(up || down) {
		return
	}
	level := slog.LevelInfo
	if down {
		level = slog.LevelWarn
	}
	d.log.Log(context.Background(), level, "backend "+tr.To.String(), "backend", tr.Backend.Name, "address", tr.Backend.Address,
		"from", tr.From.String(), "to", tr.To.String(), "reason", checkReason(tr, err))
}

// checkReason explains in words the check result behind a transition;
// err is the failed check's error, nil for a passed one.
func checkReason(tr balance.Transition, err error) string {
	switch {
	case tr.From == balance.Unknown && err == nil:
		return "first check succeeded"
	case tr.From == balance.Unknown:
		return "first check failed: " + err.Error()
	case tr.Event == balance.CheckRise:
		return fmt.Sprintf("%d consecutive successful checks", tr.Streak)
	case tr.Event == balance.CheckFall:
		return fmt.Sprintf("%d consecutive failed checks, last: %v", tr.Streak, err)
	case err == nil:
		return "check succeeded"
	default:
		return "check failed: " + err.Error()
	}
}

// thresholds are the pool's rise and fall, from [health].
func thresholds(h config.Health) balance.Thresholds {
	return balance.Thresholds{Rise: h.Rise, Fall: h.Fall}
}

// anyServing says whether a backend takes new connections now.
func (d *Daemon) anyServing() bool {
	healthy, _ := d.serving()
	return healthy > 0
}

// evacuateLater takes the connections off a down backend (close_on_down)
// one check interval after the mark-down, unless the pool panicked
// meanwhile: when every backend fails within the same interval, the first
// ones to go down must not lose their connections before the pool sees
// that all of them did.
func (d *Daemon) evacuateLater(b *balance.Backend) {
	grace := d.cfg.Load().Health.Interval.Duration
	time.AfterFunc(grace, func() {
		if on, _ := d.pool.Panic(); on || b.State() != balance.Down || !d.closeOnDown() {
			return
		}
		if n := b.EvacuateAll(); n > 0 {
			d.log.Warn("took connections off a down backend: unanswered ones replayed elsewhere, the others closed so clients reconnect", "backend", b.Name, "connections", n)
		}
	})
}

// heldVIPs says, at scrape time, which VIPs this node holds (netlink).
// Nothing when netlink cannot answer: the alert on a VIP held by no node
// then says so. Nothing for a node-local VIP either.
func (d *Daemon) heldVIPs() map[string]bool {
	cfg := d.cfg.Load()
	if !cfg.VIP.Mode.UsesVIPLink() {
		// A node-local VIP is on every worker's lo: held by all, moved by
		// none. A series would set off the alert on a VIP held twice.
		return nil
	}
	held, err := netcfg.HeldVIPsHere(cfg.Network.Interface, cfg.VIP.Addresses)
	if err != nil {
		return nil
	}
	out := make(map[string]bool, len(held))
	for a, link := range held {
		out[a.String()] = link != ""
	}
	return out
}

// backendMetrics makes a new backend's series, its state starting as the
// pool's (unknown).
func (d *Daemon) backendMetrics(name string) *metrics.BackendMetrics {
	m := d.metrics.Backend(name)
	d.metrics.BackendChanged(name, stateNames(), balance.Unknown.String(), time.Now(), false)
	return m
}

func stateNames() []string {
	var names []string
	for _, s := range balance.States() {
		names = append(names, s.String())
	}
	return names
}

// onTransition is the pool's observer: the per-backend gauge, and panic
// mode said loudly. It runs under the pool's lock.
func (d *Daemon) onTransition(tr balance.Transition) {
	if tr.Changed() {
		up := 0.0
		if tr.To.Healthy() {
			up = 1
		}
		tr.Backend.Stats.Up.Set(up)
		d.metrics.BackendChanged(tr.Backend.Name, stateNames(), tr.To.String(), tr.At, true)
	}
	if !tr.PanicChanged {
		return
	}
	if tr.Panic {
		d.metrics.PanicMode.Set(1)
		d.log.Error("PANIC MODE: most backends went down at once, more likely a fault of this host than of every apiserver; open connections are kept and new ones balanced over the last known good backends",
			"last_down", tr.Backend.Name, "healthy", d.healthyCount())
		return
	}
	d.metrics.PanicMode.Set(0)
	d.log.Warn("panic mode over: half of the backends or more are healthy again", "healthy", d.healthyCount())
}

// healthyCount is "healthy/total" for the log and STATUS=: the backends
// that take new connections, as /readyz counts them.
func (d *Daemon) healthyCount() string {
	healthy, total := d.serving()
	return fmt.Sprintf("%d/%d", healthy, total)
}

func (d *Daemon) closeOnDown() bool { return d.cfg.Load().Balance.CloseOnDown }

func (d *Daemon) alive() bool { return d.proxy.Accepting() && d.checker.Alive() }

func (d *Daemon) proxyCounters() proxy.Counters {
	return proxy.Counters{
		Retries:           d.metrics.DialRetries,
		RejectedNoBackend: d.metrics.Rejected.WithLabelValues(metrics.RejectNoBackend),
		RejectedLimit:     d.metrics.Rejected.WithLabelValues(metrics.RejectLimit),
		AcceptErrors:      func(reason string) { d.metrics.AcceptErrors.WithLabelValues(reason).Inc() },
	}
}

func proxyOptions(cfg *config.Valid, maxConnections int) proxy.Options {
	return proxy.Options{
		DialTimeout:      cfg.Timeouts.Dial.Duration,
		DialAttempts:     cfg.Balance.DialAttempts,
		KeepAlive:        cfg.Timeouts.KeepAlive.Duration,
		UserTimeout:      cfg.Timeouts.UserTimeout.Duration,
		MaxConnections:   maxConnections,
		AcceptBackoffMax: cfg.Limits.AcceptBackoffMax.Duration,
	}
}

func addrs(s *listen.Set) []string {
	var out []string
	for _, ls := range s.Ports {
		for _, l := range ls {
			out = append(out, l.Addr().String())
		}
	}
	return out
}

// withFile names the config file in an error from a package that only
// knew the key.
func withFile(err error, path string) error {
	var ce *config.Error
	if errors.As(err, &ce) && ce.File == "" {
		ce.File = path
	}
	return err
}

// ownAddrs are the addresses the config has us listen on: health checks
// that reach one fail (see health.NewProber).
func ownAddrs(cfg *config.Valid) []netip.AddrPort {
	var out []netip.AddrPort
	for _, l := range cfg.Listeners() {
		out = append(out, l.Addr)
	}
	return out
}
