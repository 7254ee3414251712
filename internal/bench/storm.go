package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vipproxy/vipproxy/internal/activation"
	"github.com/vipproxy/vipproxy/internal/testpki"
)

// The reconnect storms: StormClients long-lived mTLS watches through the
// proxy to three TLS backends, then one disruption each, every contender
// on a fresh instance:
//   - kill-backend: backend 1 SIGKILLed; its watches reconnect;
//   - restart: the proxy SIGKILLed and started again at once (a crash, or
//     an upgrade without socket activation): every watch reconnects;
//   - restart-activated: the same with the listening socket kept by the
//     bench and passed to each start, as systemd's socket activation does
//     (vipproxy only: connections wait in the backlog meanwhile);
//   - at-once: every watch connects at the same moment to a running proxy
//     (the VIP just moved to this node);
//   - upgrade: the proxy restarted as an upgrade does, every watch held
//     and new connections opened meanwhile (upgrade.go).
var stormScenarios = []string{"kill-backend", "restart", "restart-activated", "at-once", upgradeStorm}

var stormTitles = map[string]string{
	"kill-backend":      "storm: 1 of 3 backends SIGKILLed",
	"restart":           "storm: proxy SIGKILLed and restarted",
	"restart-activated": "storm: proxy SIGKILLed and restarted, socket-activated",
	"at-once":           "storm: all watches connect at once",
	upgradeStorm:        "storm: upgrade",
}

// watchPeriod is the backends' time between events.
const watchPeriod = 2 * time.Second

// stormContender says whether a contender takes part in a storm: the
// proxies, and in the at-once storm only direct (the watches connect to
// the backends themselves: the handshakes' own time on this host) and
// floor (a bare event loop: the least CPU a proxy's relaying of the storm
// can cost here). floor has no health checks, so a killed backend would
// keep getting its share, and its restart shows nothing new. The upgrade
// storm compares vipproxy with HAProxy's reload and restart.
func stormContender(name, scenario string) bool {
	switch name {
	case "direct", "floor":
		return scenario == "at-once"
	case "naive":
		return false
	case "haproxy":
		return scenario != "restart-activated"
	case "nginx":
		return scenario != "restart-activated" && scenario != upgradeStorm
	}
	return true // vipproxy and --alt builds
}

// storms runs every storm scenario for each proxy contender.
func (r *runner) storms(ctx context.Context, cs []*contender) error {
	st, err := r.stormRunner(ctx)
	if err != nil {
		return err
	}
	if r.opt.StormClients == 0 {
		n, why, err := st.fitStormClients(ctx)
		if err != nil {
			return fmt.Errorf("size the storms to this host: %w", err)
		}
		if most, _, err := storeWatches(); err == nil && slices.Contains(r.opt.Storms, upgradeStorm) && n > most {
			n = most
			why += fmt.Sprintf("; %d, what the upgrade storm's stand-in for systemd holds under this process's descriptor limit", n)
		}
		r.opt.StormClients, st.opt.StormClients = n, n
		fmt.Fprintf(r.log, "bench:   %s\n", why)
		r.res.note(why)
	}
	fmt.Fprintf(r.log, "bench:   %d watches (descriptor limit %s: a proxy holds 2 per watch), events every %s, backends %s\n",
		r.opt.StormClients, nofileLimit(), watchPeriod, strings.Join(st.backends, ","))
	for _, scenario := range r.opt.Storms {
		if _, ok := stormTitles[scenario]; !ok {
			return fmt.Errorf("unknown storm %q (want %s)", scenario, strings.Join(stormScenarios, ", "))
		}
		for range r.opt.StormReps {
			for _, c := range cs {
				for _, name := range stormRuns(c.name, scenario) {
					if err := st.storm(ctx, scenario, name); err != nil {
						if ctx.Err() != nil {
							return err
						}
						msg := fmt.Sprintf("%s, %s: %v", name, scenario, err)
						fmt.Fprintf(r.log, "bench:   FAILED %s\n", msg)
						r.res.note(firstLine(msg))
					}
				}
			}
		}
	}
	return nil
}

// stormRunner is a copy of r with its own work directory, test PKI and
// three TLS watch backends.
func (r *runner) stormRunner(ctx context.Context) (*runner, error) {
	st := *r
	st.dir = filepath.Join(r.dir, "storm")
	if r.opt.Pin == "one" {
		// The clients' and backends' TLS handshakes (about 2 ms of CPU per
		// watch) would starve the proxy on its own core and run past the
		// clients' 10 s limit: the storms keep the proxy on cpu 1 and put
		// the load on cpu 0, as make bench-storm's --pin split does.
		st.proxyCPU, st.loadCPU = "1", "0"
	}
	if _, err := testpki.Write(filepath.Join(st.dir, "pki"), nil); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	st.backends, st.backendC = nil, nil
	st.epoch = time.Now().Truncate(time.Millisecond)
	for i, p := range ports {
		st.backends = append(st.backends, fmt.Sprintf("127.0.0.1:%d", p))
		st.backendC = append(st.backendC, nil)
		if err := st.startWatchBackend(ctx, i); err != nil {
			return nil, err
		}
	}
	return &st, nil
}

func (r *runner) startWatchBackend(ctx context.Context, i int) error {
	cmd := r.pinned(r.loadCPU, r.self, "watch-backend", "--listen", r.backends[i], "--id", strconv.Itoa(i+1),
		"--pki", filepath.Join(r.dir, "pki"), "--period", watchPeriod.String(), "--epoch", strconv.FormatInt(r.epoch.UnixMilli(), 10))
	if err := r.procs.start(cmd, filepath.Join(r.dir, fmt.Sprintf("watch-backend%d.log", i+1))); err != nil {
		return err
	}
	r.backendC[i] = cmd
	return waitListening(ctx, r.backends[i], 10*time.Second)
}

// waitListening polls until addr accepts a TCP connection.
func waitListening(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after %s: %v", addr, limit, last)
}

// stormProxy is the proxy instance of one storm: it changes on a restart.
type stormProxy struct {
	name string
	port int
	cur  atomic.Pointer[contender]
	// from is the binary of vipproxy's first start ("": its own).
	from string
	// masterWorker starts HAProxy as Debian's unit does, to reload it.
	masterWorker bool
	// retired is the CPU of the process an upgrade stopped.
	retired time.Duration
}

func (p *stormProxy) pid() int {
	if c := p.cur.Load(); c != nil {
		return c.pid()
	}
	return 0
}

// launch starts the proxy (from the socket in r.activation, if set) and
// waits until it listens; a restarted proxy is not waited for: the
// clients find out.
func (r *runner) launch(ctx context.Context, p *stormProxy, wait bool) error {
	c := &contender{name: p.name}
	listen := fmt.Sprintf("127.0.0.1:%d", p.port)
	c.targets = []string{listen}
	var err error
	switch p.name {
	case "direct":
		c.targets = r.backends
		p.cur.Store(c)
		return nil
	case "haproxy", haproxyRestart:
		err = r.startHAProxy(c, listen, p.masterWorker)
	case "nginx":
		err = r.startNginx(c, listen)
	default:
		bin := r.opt.Vipproxy
		if alt, ok := r.opt.Alt[p.name]; ok {
			bin = alt
		}
		if p.from != "" {
			bin, p.from = p.from, ""
		}
		_, err = r.startVipproxy(ctx, c, p.port, bin)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cur.Store(c)
	if wait {
		return waitListening(ctx, listen, 10*time.Second)
	}
	return nil
}

// Sizing the storms to the host. A watch that connects costs a TLS
// handshake at both its ends, and the bench runs both, the client's and
// the backend's, on the load core: 1.8–2.8 ms of that core a watch
// (2026-12-03). 5,000 watches connecting at once took it 9–14 s with no
// proxy at all (direct), past the clients' 10 s handshake limit, and
// every contender, direct too, failed attempts by timeout: the storms
// measured the load generator. So by default a storm holds as many
// watches as the load core brings up at once within half that limit,
// measured before the storms, and at most stormClientsMax.
const (
	stormClientsMax      = 5000
	stormClientsLimit    = 9900 // what --storm-clients may ask: 2 proxy descriptors each under the bench's 20,000
	calibrationWatches   = 500
	stormHandshakeBudget = attemptTimeout / 2
	calibrationRuns      = 2 // the slower counts
)

// stormClientsUsage is --storm-clients' help, from the constants above.
func stormClientsUsage() string {
	return fmt.Sprintf("TLS watches held through the proxy in the storm figures (1..%d); 0: as many as this host's load core connects at once, direct, within %s, at most %d",
		stormClientsLimit, stormHandshakeBudget, stormClientsMax)
}

// fitStormClients measures how long calibrationWatches direct watches
// take to connect at once and returns the storm size that fits, with a
// sentence that says why.
func (r *runner) fitStormClients(ctx context.Context) (int, string, error) {
	var slowest time.Duration
	for range calibrationRuns {
		took, err := r.directAtOnce(ctx, calibrationWatches)
		if err != nil {
			return 0, "", err
		}
		slowest = max(slowest, took)
	}
	each := slowest / calibrationWatches
	n := fitWatches(each)
	why := fmt.Sprintf("storms sized to this host: %d watches, as many as connect in %s (half the clients' %s handshake limit; at most %d) at %s of the load core each: %d direct watches connecting at once all worked after %s, the slower of %d runs (--storm-clients sets the size)",
		n, stormHandshakeBudget, attemptTimeout, stormClientsMax, each.Round(10*time.Microsecond), calibrationWatches, slowest.Round(time.Millisecond), calibrationRuns)
	return n, why, nil
}

// fitWatches is the number of watches, in hundreds, that connect within
// stormHandshakeBudget when each takes the load core each, from 100 to
// stormClientsMax.
func fitWatches(each time.Duration) int {
	if each <= 0 {
		return stormClientsMax
	}
	n := int(stormHandshakeBudget/each) / 100 * 100
	return min(max(n, 100), stormClientsMax)
}

// directAtOnce connects clients watches straight to the backends at once
// and returns how long the last one took to work.
func (r *runner) directAtOnce(ctx context.Context, clients int) (time.Duration, error) {
	p := &stormProxy{name: "direct"}
	if err := r.launch(ctx, p, false); err != nil {
		return 0, err
	}
	wc, err := r.startWatchClient(ctx, p, true, clients, 0)
	if err != nil {
		return 0, err
	}
	defer wc.stop()
	res, err := wc.result()
	if err != nil {
		return 0, err
	}
	if res.Recovered < res.Disrupted || res.Failed > 0 {
		return 0, fmt.Errorf("%d direct watches at once: %d of %d working, %d failed attempts (first: %s)",
			clients, res.Recovered, res.Disrupted, res.Failed, res.FirstError)
	}
	return time.Duration(res.MaxMs * float64(time.Millisecond)), nil
}

// storm runs one scenario against a fresh instance of contender name.
func (r *runner) storm(ctx context.Context, scenario, name string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	p := &stormProxy{name: name, port: ports[0]}
	sr := *r
	closeHost, err := sr.stormHost(ctx, scenario, p)
	if err != nil {
		return err
	}
	defer closeHost()
	if err := sr.launch(ctx, p, true); err != nil {
		return err
	}
	defer func() { r.stopContender(p.cur.Load()) }()
	load := loadavg()
	var start time.Time
	if scenario == "at-once" {
		if stop := r.perfStorm(scenario, p); stop != nil {
			defer stop()
		}
		start = r.waitQuietPoint(ctx)
	}
	var probe time.Duration
	if scenario == upgradeStorm {
		probe = probeEvery
	}
	wc, err := r.startWatchClient(ctx, p, scenario == "at-once", r.opt.StormClients, probe)
	if err != nil {
		return err
	}
	defer wc.stop()
	m, err := sr.unleash(ctx, scenario, p, wc, start)
	if err != nil {
		return err
	}
	if m.res.Disrupted == 0 && scenario != upgradeStorm {
		// e.g. the proxy sent no watch to backend 1 (its first check
		// failed): the storm measured nothing.
		return fmt.Errorf("no watch was cut (watches per backend %s)", shares(m.res.Shares))
	}
	r.recordStorm(scenario, name, m, load)
	return nil
}

// stormWindowPeriods is how long a storm's proxy CPU is counted, in event
// periods from its start: the same window for every contender. Each
// period the backends send every watch its event at once, a burst of
// thousands of small writes through the proxy; a window that ended when
// the last watch was back held one such burst or two, by chance (five
// backend-SIGKILL storms of one build: 0.38 to 0.60 s, vipproxy and
// HAProxy each above the other in turn). A window that starts half a
// period after a burst and spans whole periods holds the same bursts,
// whole, for everyone. It is long enough for every watch to be back on
// this host (backend SIGKILL 2.6–3.3 s, the others 8.5–11.2 s); when one
// is not, the window stretches to the period in which it was (said in
// the log and the table's notes).
//
// The upgrade storm's window is shorter, 8 s: long enough for a watch
// that a handover broke silently to be found stalled (3 periods and a
// second after its last event) and counted as cut.
var stormWindowPeriods = map[string]int{"kill-backend": 3, "restart": 8, "restart-activated": 8, "at-once": 8, upgradeStorm: 4}

// waitQuietPoint waits until half a period after the backends' next event
// burst (the start of a storm's window) and returns that moment.
func (r *runner) waitQuietPoint(ctx context.Context) time.Time {
	at := quietPointAfter(r.epoch, time.Now())
	sleepUntil(ctx, at)
	return at
}

// quietPointAfter is the first moment at or after now that lies half a
// period after an event burst of the clock that started at epoch.
func quietPointAfter(epoch, now time.Time) time.Time {
	k := now.Sub(epoch) / watchPeriod
	at := epoch.Add(k*watchPeriod + watchPeriod/2)
	if at.Before(now) {
		at = at.Add(watchPeriod)
	}
	return at
}

func sleepUntil(ctx context.Context, at time.Time) {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// perfStorm records the proxy with perf (--perf-dir) during a storm that
// keeps its process (a restart's new process starts too late for perf),
// every contender alike so that their profiles compare. perf takes a
// moment to attach, so the storm waits for it.
func (r *runner) perfStorm(scenario string, p *stormProxy) func() {
	if strings.HasPrefix(scenario, "restart") || scenario == upgradeStorm {
		return nil
	}
	stop := r.perfRecordTree(p.name+"-storm-"+scenario, p.pid())
	if stop != nil {
		time.Sleep(500 * time.Millisecond)
	}
	return stop
}

// stormMeasure is what one storm measured.
type stormMeasure struct {
	res    watchResult
	cpu    time.Duration // the proxy's CPU in the window (a restarted proxy's from its start)
	window time.Duration // stormWindowPeriods, or longer if a watch was back later
	peakKB int64         // the proxy's peak RSS
}

// stormHost sets up what holds the proxy's sockets across the storm's
// restart, as systemd does, and returns how to close it once the proxy
// has stopped: the listener for a socket-activated restart; the
// listener and the file descriptor store for vipproxy's upgrade.
func (r *runner) stormHost(ctx context.Context, scenario string, p *stormProxy) (func(), error) {
	switch {
	case scenario == "restart-activated":
		f, err := activation.Socket(ctx, p.port)
		if err != nil {
			return nil, err
		}
		r.activation = f
		return func() { f.Close() }, nil
	case scenario == upgradeStorm && isVipproxy(p.name):
		p.from = r.opt.UpgradeFrom
		if p.from != "" {
			fmt.Fprintf(r.log, "bench:   %s starts as %s and is upgraded to its own build\n", p.name, p.from)
		}
		return r.upgradeHost(ctx, p.port)
	case scenario == upgradeStorm:
		p.masterWorker = true
	}
	return func() {}, nil
}

// unleash marks the start (at-once: the watch client started at start),
// disrupts, waits for every watch to work again and for the end of the
// storm's window, and measures the proxy.
func (r *runner) unleash(ctx context.Context, scenario string, p *stormProxy, wc *watchClient, start time.Time) (stormMeasure, error) {
	var before procSample
	var beforePID int
	if scenario != "at-once" {
		if err := wc.established(); err != nil {
			return stormMeasure{}, err
		}
		if stop := r.perfStorm(scenario, p); stop != nil {
			defer stop()
		}
		start = r.waitQuietPoint(ctx)
		beforePID = p.pid()
		before, _ = sampleTree(beforePID)
		if err := wc.mark(); err != nil {
			return stormMeasure{}, err
		}
	}
	peak := watchPeak(p)
	if err := r.disrupt(ctx, scenario, p); err != nil {
		peak()
		return stormMeasure{}, err
	}
	tellCut(ctx, scenario, p, wc, start)
	res, err := wc.result()
	if err != nil {
		peak()
		return stormMeasure{res: res}, err
	}
	elapsed := time.Since(start)
	if scenario == upgradeStorm {
		// The result comes once the request loop's window is over: only
		// a cut watch back late stretches it.
		elapsed = time.Duration(res.MaxMs * float64(time.Millisecond))
	}
	window := r.waitWindowEnd(ctx, scenario, start, elapsed)
	m := stormMeasure{res: res, window: window, peakKB: peak()}
	if p.pid() != 0 { // direct: no proxy to measure
		if m.cpu, err = stormCPU(scenario, p, before, beforePID); err != nil {
			return m, err
		}
	}
	if scenario == "kill-backend" {
		// Back for the next storm, once this one is measured.
		if err := r.startWatchBackend(ctx, 0); err != nil {
			return m, fmt.Errorf("restart watch backend 1: %w", err)
		}
	}
	return m, nil
}

// tellCut tells the watch client which watches the disruption cuts, so
// that it reports once they are back; in the upgrade storm, once the
// request loop has run the same time for every proxy.
func tellCut(ctx context.Context, scenario string, p *stormProxy, wc *watchClient, start time.Time) {
	switch scenario {
	case "kill-backend":
		wc.send("wait backend 1")
	case "restart", "restart-activated":
		wc.send("wait all")
	case upgradeStorm:
		sleepUntil(ctx, start.Add(stormBaseWindow(scenario)))
		wc.send(upgradeWait(p.name))
	}
}

// stormCPU is the proxy's CPU in the storm: its process tree's now less
// before (sampled at the mark, from the process beforePID); all of a
// restarted proxy's; all of an upgraded one's with the old process's
// from the mark to its exit.
func stormCPU(scenario string, p *stormProxy, before procSample, beforePID int) (time.Duration, error) {
	after, err := sampleTree(p.pid())
	if err != nil {
		return 0, err
	}
	switch {
	case strings.HasPrefix(scenario, "restart"):
		return after.CPU, nil
	case p.pid() != beforePID:
		return after.CPU + p.retired - before.CPU, nil
	}
	return after.CPU - before.CPU, nil
}

// waitWindowEnd waits for the end of the storm's window that began at
// start and lasted elapsed, and returns the window's length.
func (r *runner) waitWindowEnd(ctx context.Context, scenario string, start time.Time, elapsed time.Duration) time.Duration {
	window := stormWindow(scenario, elapsed)
	sleepUntil(ctx, start.Add(window))
	return window
}

// stormWindow is the scenario's window (stormWindowPeriods), or, when the
// storm lasted longer (elapsed), the whole periods that hold it.
func stormWindow(scenario string, elapsed time.Duration) time.Duration {
	window := stormBaseWindow(scenario)
	if elapsed > window {
		window = (elapsed + watchPeriod - 1) / watchPeriod * watchPeriod
	}
	return window
}

// stormBaseWindow is the scenario's window when no watch is back later.
func stormBaseWindow(scenario string) time.Duration {
	return time.Duration(stormWindowPeriods[scenario]) * watchPeriod
}

// disrupt does what the scenario does to the running storm.
func (r *runner) disrupt(ctx context.Context, scenario string, p *stormProxy) error {
	switch scenario {
	case "kill-backend":
		r.procs.kill(r.backendC[0])
	case "restart", "restart-activated":
		r.procs.kill(p.cur.Load().cmd)
		return r.launch(ctx, p, false)
	case upgradeStorm:
		return r.upgrade(ctx, p)
	}
	return nil
}

// watchPeak samples the proxy's RSS every 50 ms until the returned
// function is called, which returns the highest sum over its tree in KB.
func watchPeak(p *stormProxy) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if s, err := sampleTree(p.pid()); err == nil && s.RSSKB > peak.Load() {
				peak.Store(s.RSSKB)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

// watchClient is a running storm client process.
type watchClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	errs  *strings.Builder
	wait  time.Duration
}

func (r *runner) startWatchClient(ctx context.Context, p *stormProxy, atOnce bool, clients int, probe time.Duration) (*watchClient, error) {
	wait := 90 * time.Second
	args := []string{"watch", "--target", strings.Join(p.cur.Load().targets, ","), "--clients", strconv.Itoa(clients),
		"--pki", filepath.Join(r.dir, "pki"), "--period", watchPeriod.String(), "--wait", wait.String(), "--probe-every", probe.String()}
	if atOnce {
		args = append(args, "--at-once")
	}
	cmd := r.pinned(r.loadCPU, r.self, args...)
	isolate(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	wc := &watchClient{cmd: cmd, stdin: stdin, lines: make(chan string, 4), errs: &strings.Builder{}, wait: wait}
	cmd.Stderr = wc.errs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start watch client: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			wc.lines <- sc.Text()
		}
		close(wc.lines)
	}()
	return wc, nil
}

func (wc *watchClient) send(cmd string) { io.WriteString(wc.stdin, cmd+"\n") }

func (wc *watchClient) next(limit time.Duration) (string, error) {
	select {
	case line, ok := <-wc.lines:
		if !ok {
			wc.cmd.Wait()
			return "", fmt.Errorf("watch client ended: %s", strings.TrimSpace(wc.errs.String()))
		}
		return line, nil
	case <-time.After(limit):
		return "", fmt.Errorf("watch client said nothing for %s", limit)
	}
}

// established waits for every watch of the client to work.
func (wc *watchClient) established() error {
	_, err := wc.next(3 * time.Minute)
	return err
}

// mark starts the storm's clock in the client, and returns once it runs.
func (wc *watchClient) mark() error {
	wc.send("mark")
	line, err := wc.next(time.Minute)
	if err == nil && line != markedLine {
		err = fmt.Errorf("watch client: want %s after mark, got %q", markedLine, line)
	}
	return err
}

func (wc *watchClient) result() (watchResult, error) {
	line, err := wc.next(wc.wait + 30*time.Second)
	if err != nil {
		return watchResult{}, err
	}
	var res watchResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return res, fmt.Errorf("watch client: parse %q: %w", line, err)
	}
	return res, nil
}

// stop closes the client's watches (EOF on its stdin) and reaps it.
func (wc *watchClient) stop() {
	wc.stdin.Close()
	done := make(chan struct{})
	go func() {
		wc.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		killGroup(wc.cmd)
		<-done
	}
}

// nofileLimit is the hard descriptor limit the bench and its children run under.
func nofileLimit() string {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 6 && strings.HasPrefix(l, "Max open files") {
			return f[4]
		}
	}
	return "?"
}

// recordStorm adds one storm's figures to the table and says them.
func (r *runner) recordStorm(scenario, name string, m stormMeasure, load string) {
	k, res := "st-"+scenario+"-", m.res
	add := func(m string, v float64) { r.res.add(k+m, name, v) }
	if scenario != upgradeStorm || res.Disrupted > 0 {
		add("p50", res.P50ms)
		add("p99", res.P99ms)
		add("max", res.MaxMs)
	}
	add("failed", float64(res.Failed))
	add("lost", float64(res.Lost))
	if name != "direct" {
		add("cpu", m.cpu.Seconds())
		add("rss", float64(m.peakKB)/1024)
	}
	r.res.text(k+"back", name, fmt.Sprintf("%d/%d", res.Recovered, res.Disrupted))
	r.res.text(k+"share", name, shares(res.Shares))
	r.res.text(k+"load", name, load)
	if scenario == upgradeStorm {
		r.recordUpgrade(name, res)
	}
	stretched := ""
	if want := stormBaseWindow(scenario); m.window > want {
		stretched = fmt.Sprintf(" (window stretched from %s: CPU not comparable)", want)
		r.res.note(fmt.Sprintf("%s, %s: a watch was back after the %s CPU window; CPU counted over %s", name, stormTitles[scenario], want, m.window))
	}
	fmt.Fprintf(r.log, "bench:   %s %-9s back %d/%d: p50 %.0f ms p99 %.0f ms max %.0f ms, %d failed attempts (%s; first: %s), %d events lost, %d stalled, proxy CPU %.2f s in %s%s, peak RSS %.1f MB, watches per backend %s, loadavg %s\n",
		scenario, name, res.Recovered, res.Disrupted, res.P50ms, res.P99ms, res.MaxMs, res.Failed, failedBy(res.FailedBy), res.FirstError,
		res.Lost, res.Stalled, m.cpu.Seconds(), m.window, stretched, float64(m.peakKB)/1024, shares(res.Shares), load)
}

// failedBy says the failed attempts by cause, the most first.
func failedBy(m map[string]int64) string {
	causes := slices.Collect(maps.Keys(m))
	slices.SortFunc(causes, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, c := range causes {
		parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func shares(n []int) string {
	var parts []string
	for _, v := range n {
		parts = append(parts, strconv.Itoa(v))
	}
	return strings.Join(parts, "/")
}

// stormSpecs are the storm rows of the table. The goals:
// no failed attempt HAProxy does not also fail (none at all after a
// socket-activated restart), every watch back within 1.1× HAProxy's time,
// and no more proxy CPU than HAProxy during the storm.
func stormSpecs(opt options) []figureSpec {
	var fs []figureSpec
	for _, sc := range stormScenarios {
		if sc == upgradeStorm {
			fs = append(fs, upgradeSpecs(opt)...)
			continue
		}
		t, k := stormTitles[sc], "st-"+sc+"-"
		failGoal := &goal{text: "≤ HAProxy's", vsHAProxy: true}
		var backGoal, cpuGoal *goal
		if sc == "restart-activated" {
			failGoal = &goal{text: "0", limit: 0}
		} else {
			backGoal, cpuGoal = ratioAtMost(1.1), ratioAtMost(1)
		}
		fs = append(fs,
			figureSpec{key: k + "back", count: true, label: fmt.Sprintf("%s: watches back (of those cut; %d held)", t, opt.StormClients)},
			figureSpec{key: k + "p50", label: t + ": watch working again p50 ms"},
			figureSpec{key: k + "p99", label: t + ": watch working again p99 ms"},
			figureSpec{key: k + "max", label: t + ": every watch working again, ms", goal: backGoal},
			figureSpec{key: k + "failed", count: true, label: t + ": failed connection attempts", goal: failGoal},
			figureSpec{key: k + "lost", count: true, label: t + ": events missed"},
			figureSpec{key: k + "cpu", label: fmt.Sprintf("%s: proxy CPU s in the first %s", t, time.Duration(stormWindowPeriods[sc])*watchPeriod), goal: cpuGoal},
			figureSpec{key: k + "rss", label: t + ": proxy peak RSS MB"},
			figureSpec{key: k + "share", label: t + ": watches per backend after"},
			figureSpec{key: k + "load", label: t + ": load average at the start"},
		)
	}
	return fs
}
