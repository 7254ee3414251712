package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// options configure one bench run.
type options struct {
	Reps          int               // interleaved repetitions of every figure
	Duration      time.Duration     // length of one throughput, rate or latency run
	IdleConns     int               // idle connections held
	IdleSettle    time.Duration     // how long idle connections stay idle before memory is measured
	FailoverRate  int               // new connections per second during failover
	Pin           string            // one, split or none (see pinLayout)
	Nice          int               // scheduling priority of everything the bench starts
	Vipproxy      string            // path to the vipproxy binary
	Contenders    []string          // in the interleaving order
	Figures       []string          // groups to run: bulk, connrate, pingpong, idle, failover, ready, size
	SizeDir       string            // holds vipproxy-linux-{amd64,arm64,riscv64}
	Out           string            // markdown copy of the table
	CPUProfileDir string            // passed to vipproxy as VIPPROXY_CPUPROFILE
	PerfDir       string            // record with perf: vipproxy per figure group, every proxy in storms
	Alt           map[string]string // more vipproxy builds to compare: contender label -> binary
	StormClients  int               // watches held through the proxy in the storms
	StormReps     int               // repetitions of each storm
	Storms        []string          // storm scenarios to run (stormScenarios)
	UpgradeFrom   string            // the build the upgrade storm's vipproxy starts as ("": its own)
}

type runner struct {
	opt      options
	log      io.Writer
	dir      string
	self     string
	procs    *procs
	proxyCPU string
	loadCPU  string
	backends []string
	backendC []*exec.Cmd
	res      *results
	// activation, when set, is the listening socket vipproxy is started
	// with (socket activation; the storm figures).
	activation *os.File
	// store, when set, is the file descriptor store vipproxy is started
	// with (NOTIFY_SOCKET, FDSTORE) and whose descriptors are passed after
	// the activation socket, as systemd does (the upgrade storm).
	store *testutil.FDStore
	epoch time.Time // the storm backends' event clock
}

// pinLayout returns the cores for the proxy and for the load (client and
// backends). "one" puts everything on core 1: on a shared 2-core VM it is
// the most repeatable, and the proxy's CPU cost shows directly in its
// throughput. "split" gives the proxy core 1 and the load core 0.
func pinLayout(pin string) (proxy, load string, err error) {
	switch pin {
	case "one":
		return "1", "1", nil
	case "split":
		return "1", "0", nil
	case "none":
		return "", "", nil
	}
	return "", "", fmt.Errorf("--pin %q: want one, split or none", pin)
}

// run measures every figure and prints the table.
func run(ctx context.Context, opt options, stdout, stderr io.Writer) error {
	proxyCPU, loadCPU, err := pinLayout(opt.Pin)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "vipproxy-bench-")
	if err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	defer os.RemoveAll(dir)
	r := &runner{opt: opt, log: stderr, dir: dir, self: self, procs: &procs{},
		proxyCPU: proxyCPU, loadCPU: loadCPU, res: newResults()}
	defer r.procs.killAll()

	loadBefore := loadavg()
	fmt.Fprintf(stderr, "bench: %s, loadavg %s\nbench: pin=%s (proxy cpu %q, client+backends cpu %q), nice %d, %d reps of %s, work dir %s\n",
		machineLine(), loadBefore, opt.Pin, proxyCPU, loadCPU, opt.Nice, opt.Reps, opt.Duration, dir)
	if err := r.startBackends(ctx); err != nil {
		return err
	}
	contenders, err := r.startContenders(ctx)
	if err != nil {
		return err
	}
	for _, g := range opt.Figures {
		if err := r.runGroup(ctx, g, contenders); err != nil {
			return fmt.Errorf("figure group %s: %w", g, err)
		}
	}
	for _, c := range contenders {
		r.stopContender(c)
	}
	// r.opt, not opt: the storms may have sized themselves to the host.
	names := r.res.withStormColumns(r.names(contenders))
	fmt.Fprint(stderr, r.res.spread(names, r.opt))
	table := r.res.render(names, r.opt)
	machine := fmt.Sprintf("machine: %s; loadavg before %s, after %s; pinning: %s, nice %d; %s; ratios are medians of per-repetition ratios",
		machineLine(), loadBefore, loadavg(), pinText(opt.Pin), opt.Nice, repsText(opt))
	out := table + "\n" + machine + "\n"
	fmt.Fprint(stdout, "\n"+out)
	if opt.Out != "" {
		if err := os.WriteFile(opt.Out, []byte(out), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", opt.Out, err)
		}
		fmt.Fprintf(stderr, "bench: table written to %s\n", opt.Out)
	}
	return ctx.Err()
}

// repsText says how many repetitions the run's figures had: a storm-only
// run of 15 repetitions said "medians of 5" (--reps, which it never used).
func repsText(opt options) string {
	var parts []string
	if slices.ContainsFunc(opt.Figures, func(g string) bool { return g != "storm" }) {
		parts = append(parts, fmt.Sprintf("medians of %d interleaved repetitions (idle, failover: %d), %s per run", opt.Reps, min(opt.Reps, slowReps), opt.Duration))
	}
	if slices.Contains(opt.Figures, "storm") {
		parts = append(parts, fmt.Sprintf("storms: medians of %d interleaved repetitions", opt.StormReps))
	}
	return strings.Join(parts, "; ")
}

func pinText(pin string) string {
	switch pin {
	case "one":
		return "everything on cpu 1 (taskset -c 1: proxy, client, backends)"
	case "split":
		return "proxy on cpu 1, client and backends on cpu 0 (taskset)"
	}
	return "unpinned"
}

func (r *runner) names(cs []*contender) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.name)
	}
	return n
}

// startBackends starts three backend processes (one each, so one can be
// SIGKILLed alone) on the load core.
func (r *runner) startBackends(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	for i, p := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		r.backends = append(r.backends, addr)
		r.backendC = append(r.backendC, nil)
		if err := r.startBackend(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) startBackend(ctx context.Context, i int) error {
	cmd := r.pinned(r.loadCPU, r.self, "backend", "--listen", r.backends[i], "--id-log", r.idLog(i))
	if err := r.procs.start(cmd, filepath.Join(r.dir, fmt.Sprintf("backend%d.log", i+1))); err != nil {
		return err
	}
	r.backendC[i] = cmd
	return waitServing(ctx, r.backends[i], 10*time.Second)
}

func (r *runner) startContenders(ctx context.Context) ([]*contender, error) {
	ports, err := freePorts(len(r.opt.Contenders))
	if err != nil {
		return nil, err
	}
	var cs []*contender
	for i, name := range r.opt.Contenders {
		c, err := r.startContender(ctx, name, ports[i])
		if err != nil {
			if name == "vipproxy" {
				// The daemon may not exist yet: measure the others and say so.
				fmt.Fprintf(r.log, "bench: vipproxy left out: %v\n", err)
				r.res.note("vipproxy did not start: " + firstLine(err.Error()))
				continue
			}
			return nil, err
		}
		if c.name == "vipproxy" {
			r.res.add("ready", c.name, float64(c.readyIn.Microseconds())/1e3)
		}
		fmt.Fprintf(r.log, "bench: %s serving on %s (pid %d)\n", name, strings.Join(c.targets, ","), c.pid())
		cs = append(cs, c)
	}
	return cs, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func (r *runner) runGroup(ctx context.Context, group string, cs []*contender) error {
	fmt.Fprintf(r.log, "bench: == %s\n", group)
	if stop := r.perfRecord(group, cs); stop != nil {
		defer stop()
	}
	switch group {
	case "bulk":
		for _, streams := range []int{1, 8} {
			for _, dir := range []string{"up", "down"} {
				if err := r.interleave(ctx, cs, func(c *contender) error { return r.bulk(ctx, c, streams, dir) }); err != nil {
					return err
				}
			}
		}
	case "connrate":
		for _, workers := range []int{1, 32} {
			if err := r.interleave(ctx, cs, func(c *contender) error { return r.connRate(ctx, c, workers) }); err != nil {
				return err
			}
		}
	case "pingpong":
		for _, conns := range []int{1, 64} {
			if err := r.interleave(ctx, cs, func(c *contender) error { return r.pingPong(ctx, c, conns) }); err != nil {
				return err
			}
		}
	case "idle":
		return r.interleaveN(ctx, cs, slowReps, func(c *contender) error { return r.idle(ctx, c) })
	case "failover":
		return r.interleaveN(ctx, cs, slowReps, func(c *contender) error {
			if c.cmd == nil {
				return nil // direct has nothing to fail over to
			}
			return r.failover(ctx, c)
		})
	case "ready":
		return r.readyTimes(ctx, cs)
	case "syscalls":
		return r.interleaveN(ctx, cs, 1, func(c *contender) error { return r.syscalls(ctx, c) })
	case "storm":
		return r.storms(ctx, cs)
	case "size":
		r.sizes()
	default:
		return fmt.Errorf("unknown figure group %q", group)
	}
	return nil
}

// interleave runs one measurement per contender, contender after contender,
// Reps times: A B C D, A B C D, ... so slow drifts of a shared machine hit
// everyone alike.
func (r *runner) interleave(ctx context.Context, cs []*contender, measure func(*contender) error) error {
	return r.interleaveN(ctx, cs, r.opt.Reps, measure)
}

// slowReps bounds the repetitions of the slow and steady figures (idle
// memory varies by a few percent, failover counts are summed).
const slowReps = 3

func (r *runner) interleaveN(ctx context.Context, cs []*contender, reps int, measure func(*contender) error) error {
	for rep := range min(reps, r.opt.Reps) {
		for _, c := range cs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := measure(c); err != nil {
				if ctx.Err() != nil {
					return err
				}
				// One contender failing (e.g. a proxy that died) must not
				// cost the others their figures: say so and go on.
				msg := fmt.Sprintf("%s, repetition %d: %v", c.name, rep+1, err)
				fmt.Fprintf(r.log, "bench:   FAILED %s\n", msg)
				r.res.note(firstLine(msg))
			}
		}
	}
	return nil
}

// cpuUse is the CPU time a proxy spent during one load.
type cpuUse struct {
	Total time.Duration // user + system
	Sys   time.Duration // system: in the kernel, mostly the TCP work of its socket calls
	// Switches is the threads' context switches.
	Switches int64
}

// measured runs one load against c and returns its result and the proxy's
// CPU time spent meanwhile (zero for direct).
func (r *runner) measured(ctx context.Context, c *contender, spec loadSpec) (loadResult, cpuUse, error) {
	spec.Targets = c.targets
	var before procSample
	var err error
	if pid := c.pid(); pid != 0 {
		if before, err = sampleTree(pid); err != nil {
			return loadResult{}, cpuUse{}, err
		}
	}
	res, err := r.load(ctx, spec)
	if err != nil {
		return res, cpuUse{}, err
	}
	var use cpuUse
	if pid := c.pid(); pid != 0 {
		after, err := sampleTree(pid)
		if err != nil {
			return res, cpuUse{}, err
		}
		use = cpuUse{Total: after.CPU - before.CPU, Sys: after.Sys - before.Sys, Switches: after.Switches - before.Switches}
	}
	return res, use, nil
}

func (spec loadSpec) args() []string {
	return []string{"load", "--kind", spec.Kind, "--targets", strings.Join(spec.Targets, ","),
		"--conns", strconv.Itoa(spec.Conns), "--duration", spec.Duration.String(),
		"--size", strconv.Itoa(spec.Size), "--rate", strconv.Itoa(spec.Rate), "--sources", strconv.Itoa(spec.Sources)}
}

// load runs the load subcommand pinned to the load core, bounded in time.
func (r *runner) load(ctx context.Context, spec loadSpec) (loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, spec.Duration+60*time.Second)
	defer cancel()
	cmd := r.pinned(r.loadCPU, r.self, spec.args()...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	isolate(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return loadResult{}, fmt.Errorf("load %s: %w: %s", spec.Kind, err, strings.TrimSpace(stderr.String()))
	}
	var res loadResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("load %s: parse %q: %w", spec.Kind, out, err)
	}
	if res.Errors > 0 {
		fmt.Fprintf(r.log, "bench:   %s: %d errors, first: %s\n", spec.Kind, res.Errors, res.FirstError)
	}
	return res, nil
}

func (r *runner) bulk(ctx context.Context, c *contender, streams int, dir string) error {
	res, cpu, err := r.measured(ctx, c, loadSpec{Kind: "bulk-" + dir, Conns: streams, Duration: r.opt.Duration})
	if err != nil {
		return err
	}
	mbps := float64(res.Bytes) / res.Seconds / 1e6
	key := fmt.Sprintf("%d-%s", streams, dir)
	r.res.add("bulk-"+key, c.name, mbps)
	if c.cmd != nil && res.Bytes > 0 {
		r.res.add("cpugb-"+key, c.name, cpu.Total.Seconds()/(float64(res.Bytes)/1e9))
	}
	fmt.Fprintf(r.log, "bench:   bulk %-6s %-9s %8.0f MB/s  cpu %.2fs\n", key, c.name, mbps, cpu.Total.Seconds())
	return nil
}

func (r *runner) connRate(ctx context.Context, c *contender, workers int) error {
	res, cpu, err := r.measured(ctx, c, loadSpec{Kind: "connrate", Conns: workers, Duration: r.opt.Duration, Sources: 8})
	if err != nil {
		return err
	}
	rate := float64(res.Ops) / res.Seconds
	k := strconv.Itoa(workers)
	r.res.add("cps-"+k, c.name, rate)
	r.res.add("c2fb50-"+k, c.name, res.P50us)
	r.res.add("c2fb99-"+k, c.name, res.P99us)
	if c.cmd != nil && res.Ops > 0 {
		r.res.add("cpuconn-"+k, c.name, float64(cpu.Total.Microseconds())/float64(res.Ops))
		r.res.add("sysconn-"+k, c.name, float64(cpu.Sys.Microseconds())/float64(res.Ops))
		r.res.add("ctxconn-"+k, c.name, float64(cpu.Switches)/float64(res.Ops))
	}
	fmt.Fprintf(r.log, "bench:   connrate %-2d %-9s %8.0f conn/s p50 %.0fµs p99 %.0fµs errors %d\n",
		workers, c.name, rate, res.P50us, res.P99us, res.Errors)
	return nil
}

func (r *runner) pingPong(ctx context.Context, c *contender, conns int) error {
	res, cpu, err := r.measured(ctx, c, loadSpec{Kind: "pingpong", Conns: conns, Duration: r.opt.Duration, Size: 64})
	if err != nil {
		return err
	}
	k := strconv.Itoa(conns)
	r.res.add("rtps-"+k, c.name, float64(res.Ops)/res.Seconds)
	r.res.add("pp50-"+k, c.name, res.P50us)
	r.res.add("pp99-"+k, c.name, res.P99us)
	r.res.add("pp999-"+k, c.name, res.P999us)
	if c.cmd != nil && res.Ops > 0 {
		r.res.add("cpurt-"+k, c.name, float64(cpu.Total.Nanoseconds())/1e3/float64(res.Ops))
	}
	fmt.Fprintf(r.log, "bench:   pingpong %-2d %-9s p50 %.1fµs p99 %.1fµs p999 %.1fµs (%d round trips)\n",
		conns, c.name, res.P50us, res.P99us, res.P999us, res.Ops)
	return nil
}

// idle measures each proxy on a fresh instance: memory a process once
// took is rarely given back, so a second round on the same process would
// measure nothing.
func (r *runner) idle(ctx context.Context, c *contender) error {
	if c.cmd == nil {
		return r.idleOn(ctx, c)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	fresh, err := r.startContender(ctx, c.name, ports[0])
	if err != nil {
		return err
	}
	defer r.stopContender(fresh)
	return r.idleOn(ctx, fresh)
}

// idleOn holds IdleConns connections through c, checked end to end, and
// measures what the proxy needs for them.
func (r *runner) idleOn(ctx context.Context, c *contender) error {
	var before procSample
	var err error
	if c.pid() != 0 {
		if before, err = sampleTree(c.pid()); err != nil {
			return err
		}
	}
	goBefore := scrapeGoRuntime(ctx, c.admin)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	spec := loadSpec{Kind: "idle", Targets: c.targets, Conns: r.opt.IdleConns, Duration: 2 * time.Minute, Sources: 4}
	cmd := r.pinned(r.loadCPU, r.self, spec.args()...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	isolate(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start idle load: %w", err)
	}
	defer cmd.Wait()
	defer stdin.Close() // releases the connections
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("idle load: %w: %s", err, stderr.String())
	}
	var res loadResult
	if err := json.Unmarshal(line, &res); err != nil {
		return fmt.Errorf("idle load: parse %q: %w", line, err)
	}
	r.res.add("idle-est", c.name, float64(res.Established))
	msg := fmt.Sprintf("bench:   idle %-9s %d/%d established", c.name, res.Established, spec.Conns)
	if c.pid() != 0 && !alive(c.pid()) {
		msg += ", the proxy EXITED"
		r.res.note(c.name + " exited while holding idle connections")
	} else if c.pid() != 0 && res.Established > 0 {
		time.Sleep(r.opt.IdleSettle) // idle means idle: let the proxy settle after the burst
		after, err := sampleTree(c.pid())
		if err != nil {
			return err
		}
		n := float64(res.Established)
		rss := float64(after.RSSKB-before.RSSKB) / n
		fds := float64(after.FDs-before.FDs) / n
		r.res.add("idle-rss", c.name, rss)
		r.res.add("idle-fds", c.name, fds)
		msg += fmt.Sprintf(", %.2f KB RSS and %.2f fds per connection", rss, fds)
		msg += goRuntimeDelta(ctx, c.admin, goBefore, n)
	}
	if res.Errors > 0 {
		msg += fmt.Sprintf(", %d errors, first: %s", res.Errors, res.FirstError)
	}
	fmt.Fprintln(r.log, msg)
	return nil
}

// failover opens FailoverRate connections per second through c and
// SIGKILLs backend 2 one second in; it then restarts the backend and waits
// until the proxies may consider it healthy again (rise 2 x 1 s).
func (r *runner) failover(ctx context.Context, c *contender) error {
	spec := loadSpec{Kind: "failover", Targets: c.targets, Conns: 1, Rate: r.opt.FailoverRate, Duration: 4 * time.Second}
	type outcome struct {
		res loadResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.load(ctx, spec)
		done <- outcome{res, err}
	}()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	r.procs.kill(r.backendC[1])
	o := <-done
	received, logErr := readIDs(r.idLog(1))
	if err := r.startBackend(ctx, 1); err != nil {
		return fmt.Errorf("restart backend 2: %w", err)
	}
	if o.err != nil {
		return o.err
	}
	if logErr != nil {
		return logErr
	}
	var inFlight int
	for _, id := range o.res.FailedIDs {
		if received[id] {
			inFlight++
		}
	}
	r.res.add("fail", c.name, float64(int(o.res.Errors)-inFlight))
	r.res.add("fail-inflight", c.name, float64(inFlight))
	r.res.add("fail-tried", c.name, float64(o.res.Ops))
	fmt.Fprintf(r.log, "bench:   failover %-9s %d of %d new connections failed, %d more were open to the killed backend\n",
		c.name, int(o.res.Errors)-inFlight, o.res.Ops, inFlight)
	select {
	case <-time.After(3500 * time.Millisecond):
	case <-ctx.Done():
	}
	return nil
}

func (r *runner) idLog(i int) string {
	return filepath.Join(r.dir, fmt.Sprintf("backend%d.ids", i+1))
}

// readIDs reads a backend's log of tagged connection ids.
func readIDs(path string) (map[uint64]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read backend id log: %w", err)
	}
	ids := make(map[uint64]bool, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		ids[binary.LittleEndian.Uint64(b)] = true
	}
	return ids, nil
}

// readyTimes starts extra vipproxy instances and measures start to READY=1.
func (r *runner) readyTimes(ctx context.Context, cs []*contender) error {
	if !r.has(cs, "vipproxy") {
		return nil
	}
	for range r.opt.Reps - 1 { // the contender's own start was the first
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		c, err := r.startContender(ctx, "vipproxy", ports[0])
		if err != nil {
			return err
		}
		r.res.add("ready", c.name, float64(c.readyIn.Microseconds())/1e3)
		fmt.Fprintf(r.log, "bench:   ready %-9s READY=1 after %.1f ms\n", c.name, float64(c.readyIn.Microseconds())/1e3)
		r.stopContender(c)
	}
	return nil
}

func (r *runner) has(cs []*contender, name string) bool {
	for _, c := range cs {
		if c.name == name {
			return true
		}
	}
	return false
}

// sizes records the stripped static binaries built by `make bench-size`.
func (r *runner) sizes() {
	if r.opt.SizeDir == "" {
		return
	}
	for _, arch := range []string{"amd64", "arm64", "riscv64"} {
		fi, err := os.Stat(filepath.Join(r.opt.SizeDir, "vipproxy-linux-"+arch))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(r.log, "bench: size %s: %v\n", arch, err)
			}
			continue
		}
		r.res.add("size-"+arch, "vipproxy", float64(fi.Size())/1e6)
	}
}
