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

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/announce"
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
	commit   string // "" when the build does not say
	log      *slog.Logger
	level    *slog.LevelVar
	notifier *notify.Notifier
	metrics  *metrics.Metrics
	ready    atomic.Bool  // READY sent and not stopping
	control  string       // control socket path ("" : none), see admin.ControlSocketName
	open     atomic.Int64 // client connections open on every port: the cap's count
	// acceptEnded gets the error of an accept loop that ended on its own.
	acceptEnded chan error
	hup         <-chan os.Signal

	// cfg is the config in force: read without a lock anywhere, swapped
	// whole by a reload (apply).
	cfg atomic.Pointer[config.Valid]

	mu         sync.Mutex
	reloadErr  string
	adminErr   string // why admin.listen does not serve; "" when it does
	reloads    uint64 // reloads done, accepted or refused
	lastReload time.Time
	ports      []*portServer // in the order of the config
	stopping   bool
	// handover counts the connections handed over, resumed and closed
	// across a restart, by outcome and reason (handover.go).
	handover map[string]handoverCount
	// stopJob is the job that stops the unit, as ExecStop= reported it
	// (handover.go, StopJobPath); nil: none reported.
	stopJob *string

	// Discovery (see discovery.go). setMu serialises changes of the
	// backend set; members, sources and discoveryErrors are under mu.
	bg              context.Context // lives until the daemon returns
	finder          *finder         // nil when discovery is off; set by the loop, under mu
	setMu           sync.Mutex
	members         []discovery.Member
	discoveryErrors uint64
}

// Run loads the config at path and serves until ctx is cancelled, then
// drains. version and commit are the build's, as `vipproxy version`
// prints them (vipproxy_build_info). A config error is returned as a
// *config.Error.
func Run(ctx context.Context, path, version, commit string, stderr io.Writer) error {
	// SIGHUP is a reload from the first moment: Go's default for it is to
	// exit, and one that came before the loop (a reload right after READY,
	// or during a slow start) ended the daemon. The loop reloads for it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := config.Load(path, config.AllFiles)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level.Slog())
	log := logging.New(stderr, level, os.Getenv("JOURNAL_STREAM"))
	d := &Daemon{version: version, commit: commit, log: log, level: level, notifier: notify.New(log), lastReload: time.Now(),
		control: admin.ControlSocketPath(os.Getenv), hup: hup}
	d.cfg.Store(cfg)
	return d.run(ctx)
}

func (d *Daemon) run(ctx context.Context) error {
	cfg := d.cfg.Load()
	d.metrics = metrics.New()
	d.metrics.SetBuild(d.version, d.commit)
	d.metrics.SetVIPHeld(d.heldVIPs)
	d.metrics.SetBGPAnnounced(d.bgpAnnounced)
	for _, r := range listen.Reasons() {
		d.metrics.AcceptErrors.WithLabelValues(r) // at 0 before the first error
	}
	d.acceptEnded = make(chan error, 1)
	d.finder = d.newFinder(cfg)
	if d.finder != nil {
		d.members = d.finder.w.Members() // the last known set, until the first list
	}
	probers, err := newProbers(cfg)
	if err != nil {
		return withFile(err, cfg.Path)
	}
	pairs, passed := splitPairs(activation.Files(true))
	listeners, err := listen.OpenFiles(ctx, passed, cfg.VIP, cfg.ServedPorts())
	if err != nil {
		closeFiles(pairs)
		return d.bindFailed(err, cfg)
	}
	defer listeners.Close()
	for _, note := range listeners.Notes {
		d.log.Warn(note)
	}
	bg, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	d.bg = bg
	defer func() { d.finder.close() }()
	if err := d.startPorts(cfg, probers, listeners); err != nil {
		closeFiles(pairs)
		return err
	}
	defer d.closePorts()
	d.resumePairs(pairs)
	if d.finder != nil {
		d.finder.start(bg)
	}
	if err := d.startAdmin(bg, cfg, listeners.Admin); err != nil {
		d.stopAccepting()
		return err
	}
	d.waitUsable(ctx)
	d.log.Info("serving", "listeners", addrs(listeners), "activated", listeners.Activated, "ports", portNames(cfg),
		"backends", d.backendCount(cfg), "discovery", cfg.Discovery.Enable, "algorithm", cfg.Balance.Algorithm)
	d.sayStore()
	d.ready.Store(true)
	d.notifier.Ready(d.statusLine())
	go d.notifier.Watchdog(bg, d.alive)
	return d.loop(ctx)
}

// newProbers builds each port's health check, by port name.
func newProbers(cfg *config.Valid) (map[string]health.Prober, error) {
	out := map[string]health.Prober{}
	for _, p := range cfg.ServedPorts() {
		prober, err := health.NewProber(p.Health, ownAddrs(cfg)...)
		if err != nil {
			return nil, fmt.Errorf("port %s: %w", p.Name, err)
		}
		out[p.Name] = prober
	}
	return out, nil
}

// startPorts builds and starts a portServer for each port of cfg on its
// listeners; the backend set is applied to every one before any serves.
func (d *Daemon) startPorts(cfg *config.Valid, probers map[string]health.Prober, listeners *listen.Set) error {
	initial, _, _ := backendSet(cfg, d.members)
	maxConns := d.applyMaxConnections(cfg)
	for _, p := range cfg.ServedPorts() {
		ps, err := d.newPortServer(cfg, p, initial, probers[p.Name], maxConns)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.ports = append(d.ports, ps)
		d.mu.Unlock()
	}
	d.applyBackends()
	for _, ps := range d.servers() {
		if err := ps.start(d.bg, listeners.Ports[ps.name]); err != nil {
			d.stopAccepting()
			return err
		}
	}
	return nil
}

// servers returns the ports served now.
func (d *Daemon) servers() []*portServer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ports)
}

// closePorts releases every port's pooled pipes (after the drain).
func (d *Daemon) closePorts() {
	for _, ps := range d.servers() {
		ps.proxy.Close()
	}
}

// stopAccepting closes every port's listeners.
func (d *Daemon) stopAccepting() {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	for _, ps := range d.servers() {
		ps.proxy.StopAccepting()
	}
}

func portNames(cfg *config.Valid) []string {
	var out []string
	for _, p := range cfg.ServedPorts() {
		out = append(out, p.Name)
	}
	return out
}

// bindFailed names who holds the VIP port and the fix when the listener
// cannot bind (a local apiserver on *:6443, most often), in the error, the
// log and STATUS=.
func (d *Daemon) bindFailed(err error, cfg *config.Valid) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		for _, p := range cfg.ServedPorts() {
			if why := portowner.Explain("/proc", cfg.VIP.Addresses, p.Port, cfg.VIP.ReusePort); why != "" {
				err = fmt.Errorf("%w: port %s: %s", err, p.Name, why)
				break
			}
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
		case err := <-d.acceptEnded:
			return err
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

// waitUsable holds READY (and /readyz) until each port has a healthy
// backend or every backend has a check result, bounded so a slow check
// cannot hold the start forever. A dead backend's check timeout must not
// hold up a restart: the listener is serving already, and keepalived's
// probe reads /readyz.
func (d *Daemon) waitUsable(ctx context.Context) {
	for _, ps := range d.servers() {
		h := ps.port().Health
		wctx, cancel := context.WithTimeout(ctx, h.Timeout.Duration+h.Interval.Duration+time.Second)
		err := ps.checker.WaitUsable(wctx, ps.anyServing)
		cancel()
		if err != nil {
			d.log.Warn("no health check result yet; ready anyway", "port", ps.name, "err", err)
		}
	}
}

// openConns counts the client connections open on every port.
func (d *Daemon) openConns() int64 { return d.open.Load() }

// shutdown stops accepting and, when systemd restarts the unit (stopPlan),
// hands the open connections over to the next start through its file
// descriptor store (handover.go); otherwise, or when the store fails,
// they drain.
func (d *Daemon) shutdown() error {
	d.ready.Store(false)
	handOver, why := d.stopPlan()
	if handOver {
		store, _ := notify.OpenFDStore(os.Getenv)
		if store != nil {
			defer store.Close()
			if d.handOver(store) {
				return nil
			}
			why = "the file descriptor store refused a connection"
		}
	}
	d.log.Info("connections drain: they are not handed over to a next start", "reason", why)
	return d.drain()
}

// drain lets open connections finish up to the drain timeout, closing
// those that stay idle for timeouts.drain_idle meanwhile, then closes
// the rest.
func (d *Daemon) drain() error {
	cfg := d.cfg.Load()
	drain, drainIdle := cfg.Timeouts.Drain.Duration, cfg.Timeouts.DrainIdle.Duration
	open := d.openConns()
	d.notifier.Stopping(fmt.Sprintf("draining %d connections", open))
	d.log.Info("stopping: no longer accepting, draining", "open", open, "timeout", drain, "close_idle_after", drainIdle)
	d.stopAccepting()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if drainIdle > 0 {
		go d.closeIdle(ctx, drainIdle)
	}
	if d.drained(ctx) {
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
	d.drained(ctx2)
	return nil
}

// drained waits until every port's connections are closed or ctx is done.
func (d *Daemon) drained(ctx context.Context) bool {
	all := true
	for _, ps := range d.servers() {
		all = ps.proxy.Drain(ctx) && all
	}
	return all
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
			d.log.Info("draining: closed idle connections", "closed", closed, "idle_for", idleFor, "open", d.openConns())
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

// allBackends are every port's backends, those draining after a removal too.
func (d *Daemon) allBackends() []*balance.Backend {
	var out []*balance.Backend
	for _, ps := range d.servers() {
		out = append(out, ps.pool.Backends()...)
		d.mu.Lock()
		out = append(out, ps.retired...)
		d.mu.Unlock()
	}
	return out
}

// logTransition says, once, that a check result took a backend up or
// down. Recovering counts as still down: a backend that alternates between
// passing and failing checks while down does not flood the journal.
func logTransition(log *slog.Logger, tr balance.Transition, err error) {
	up := tr.To == balance.Up
	down := tr.To == balance.Down && tr.From != balance.Recovering
	if !tr.Changed() || !(up || down) {
		return
	}
	level := slog.LevelInfo
	if down {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "backend "+tr.To.String(), "backend", tr.Backend.Name, "address", tr.Backend.Address,
		"from", tr.From.String(), "to", tr.To.String(), "reason", checkReason(tr, err))
}

// checkReason explains in words the check result behind a transition;
// err is the failed check's error, nil for a passed one.
func checkReason(tr balance.Transition, err error) string {
	switch {
	case tr.From.Unchecked() && err == nil:
		return "first check succeeded"
	case tr.From.Unchecked():
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

// heldVIPs says, at scrape time, which VIPs this node holds (netlink).
// Nothing when netlink cannot answer: the alert on a VIP held by no node
// then says so. Nothing for a node-local VIP either.
func (d *Daemon) heldVIPs() map[string]bool {
	cfg := d.cfg.Load()
	if !cfg.VIP.Mode.UsesVIPLink() || cfg.VIP.Mode.UsesBGP() {
		// A node-local VIP is on every worker's lo, a BGP VIP on every
		// ready node's announce link: held by all, moved by none. A series
		// would set off the alert on a VIP held twice.
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

// bgpAnnounced says, at scrape time, whether the announce link holds the
// VIPs (vipproxy announce's doing), in bgp mode only. Unknown (netlink
// cannot answer) reads as not announced: the alert then asks.
func (d *Daemon) bgpAnnounced() (on, applies bool) {
	cfg := d.cfg.Load()
	if !cfg.VIP.Mode.UsesBGP() {
		return false, false
	}
	on, err := announce.Announced(cfg.BGP.Interface, cfg.VIP.Addresses)
	return on && err == nil, true
}

func stateNames() []string {
	var names []string
	for _, s := range balance.States() {
		names = append(names, s.String())
	}
	return names
}

// alive: every port accepts and runs its health checks (the watchdog).
func (d *Daemon) alive() bool {
	for _, ps := range d.servers() {
		if !ps.proxy.Accepting() || !ps.checker.Alive() {
			return false
		}
	}
	return true
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
