package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/internal/activation"
	"github.com/vipproxy/vipproxy/internal/testutil"
	"golang.org/x/sys/unix"
)

// The upgrade storm: the proxy is restarted the way an operator
// upgrades it, with every watch held and a request loop opening new
// connections (probeEvery) meanwhile:
//   - vipproxy: `systemctl restart vipproxy.service` with the file
//     descriptor store. The bench stands in for systemd: it holds the
//     listening socket (vipproxy.socket) and the store (a NOTIFY_SOCKET
//     that keeps what FDSTORE=1 sends, internal/testutil.FDStore), sends
//     the daemon SIGTERM, waits for it to exit, and starts the next one
//     with LISTEN_FDS: the listener, then everything the store holds,
//     named in LISTEN_FDNAMES. The old daemon hands every connection to
//     the store; new ones wait in the listener's queue. --upgrade-from
//     makes it a binary upgrade.
//   - haproxy: `systemctl reload haproxy` in master-worker mode, as
//     Debian's unit runs it: SIGUSR2 to the master, which starts a new
//     worker; the old one keeps its connections.
//   - haproxy-restart: `systemctl restart haproxy`: SIGTERM, wait for
//     the exit, start again.
const upgradeStorm = "upgrade"

// haproxyRestart is the column of HAProxy restarted in the upgrade storm.
const haproxyRestart = "haproxy-restart"

// probeEvery is the upgrade storm's request loop: a new connection
// every 20 ms (50 a second), each timed from connect to its ACK.
const probeEvery = 20 * time.Millisecond

// stormRuns are the columns contender name runs as in a storm: HAProxy
// is both reloaded and restarted in the upgrade storm.
func stormRuns(name, scenario string) []string {
	if !stormContender(name, scenario) {
		return nil
	}
	if scenario == upgradeStorm && name == "haproxy" {
		return []string{"haproxy", haproxyRestart}
	}
	return []string{name}
}

// withStormColumns adds to the table's contenders the storm-only
// columns that have figures.
func (r *results) withStormColumns(names []string) []string {
	for _, f := range r.vals {
		if _, ok := f[haproxyRestart]; ok {
			for i, n := range names {
				if n == "haproxy" {
					return append(names[:i+1:i+1], append([]string{haproxyRestart}, names[i+1:]...)...)
				}
			}
			return append(names, haproxyRestart)
		}
	}
	return names
}

// isVipproxy says whether a storm column is a vipproxy build.
func isVipproxy(name string) bool {
	switch name {
	case "direct", "floor", "naive", "haproxy", haproxyRestart, "nginx":
		return false
	}
	return true
}

// upgradeHost sets up the stand-in for systemd of one vipproxy upgrade
// storm on port: the activation socket and the file descriptor store,
// sized as the unit's FileDescriptorStoreMax= for the connection cap.
// The returned function closes both, after the proxy has stopped.
func (r *runner) upgradeHost(ctx context.Context, port int) (func(), error) {
	if err := r.fitsStore(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.runtimeDir(), 0o711); err != nil {
		return nil, fmt.Errorf("the daemon's runtime directory: %w", err)
	}
	f, err := activation.Socket(ctx, port)
	if err != nil {
		return nil, err
	}
	store, err := testutil.ListenFDStore(filepath.Join(r.dir, fmt.Sprintf("fdstore-%d.sock", port)), 2*maxConns)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.activation, r.store = f, store
	return func() {
		store.Close()
		f.Close()
	}, nil
}

// storeReserve is what the bench holds besides the store: its own
// sockets, pipes and logs.
const storeReserve = 200

// fitsStore checks that the bench can stand in for systemd: at the
// restart it holds both sockets of every watch in the store and a copy
// of each, passed to the new daemon (systemd, with its own limit, does
// the same).
func (r *runner) fitsStore() error {
	most, limit, err := storeWatches()
	if err != nil {
		return err
	}
	if r.opt.StormClients > most {
		return fmt.Errorf("the stand-in for systemd holds 4 descriptors per watch at the restart (the store's 2 and their copies passed on): %d watches need %d, over this process's limit of %d (--storm-clients %d at most)",
			r.opt.StormClients, 4*r.opt.StormClients+storeReserve, limit, most)
	}
	return nil
}

// storeWatches is how many watches the stand-in for systemd can hold
// through an upgrade storm under this process's descriptor limit.
func storeWatches() (most int, limit uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the descriptor limit: %w", err)
	}
	return max(int(lim.Cur)-storeReserve, 0) / 4, lim.Cur, nil
}

// fromStore sets cmd up as systemd starts a service that has a file
// descriptor store: NOTIFY_SOCKET is the store, $FDSTORE its size, and
// LISTEN_FDS the activation socket followed by everything the store
// holds (copies: the store keeps its own until FDSTOREREMOVE=1).
func (r *runner) fromStore(cmd *exec.Cmd) *launchEnv {
	cmd.Env = append(cmd.Env, r.store.Env()...)
	// RuntimeDirectory=: the control socket, on which ExecStop='s
	// prestop tells the daemon that a restart stops it (upgrade).
	cmd.Env = append(cmd.Env, "RUNTIME_DIRECTORY="+r.runtimeDir())
	files, names := r.store.Files()
	activation.PassFiles(cmd, append([]*os.File{r.activation}, files...), append([]string{listenName}, names...))
	if len(files) > 0 {
		fmt.Fprintf(r.log, "bench:   the new daemon gets %d descriptors from the store\n", len(files))
	}
	return &launchEnv{passed: files, store: r.store, from: len(r.store.Messages())}
}

// upgrade does what the upgrade storm does to p's proxy and keeps the
// CPU of a process that ended (p.retired).
func (r *runner) upgrade(ctx context.Context, p *stormProxy) error {
	old := p.cur.Load()
	if p.name == "haproxy" {
		// Debian's haproxy.service: ExecReload=/bin/kill -USR2 $MAINPID.
		if err := old.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return fmt.Errorf("reload haproxy: %w", err)
		}
		return nil
	}
	// systemd's restart: ExecStop= (vipproxy.service's prestop, of the
	// binary installed now, tells the daemon the job is a restart), then
	// SIGTERM, wait for the main process to exit (TimeoutStopSec= is
	// longer; then SIGKILL), start again.
	if p.name != haproxyRestart {
		r.preStop(ctx, old.cmd.Process.Pid)
	}
	r.procs.stop(old.cmd, syscall.SIGTERM, 30*time.Second)
	if st := old.cmd.ProcessState; st != nil {
		p.retired = st.UserTime() + st.SystemTime()
	}
	return r.launch(ctx, p, false)
}

// upgradeWait is what the watch client is told to wait for: HAProxy's
// restart cuts every watch; the others should cut none.
func upgradeWait(name string) string {
	if name == haproxyRestart {
		return "wait all"
	}
	return "wait none"
}

// upgradeSpecs are the upgrade storm's rows. The goals are the
// handover's: no watch cut, no new connection failed, new connections
// delayed at most 200 ms at p99.
func upgradeSpecs(opt options) []figureSpec {
	t, k := stormTitles[upgradeStorm], "st-"+upgradeStorm+"-"
	zero := &goal{text: "0", limit: 0}
	return []figureSpec{
		{key: k + "cut", count: true, sum: true, label: fmt.Sprintf("%s: watches cut, total of all reps (%d held; vipproxy restarted with the fd store, haproxy reloaded, %s stopped and started)", t, opt.StormClients, haproxyRestart), goal: zero},
		{key: k + "max", label: t + ": every cut watch working again, ms"},
		{key: k + "failed", count: true, label: t + ": failed attempts of the cut watches"},
		{key: k + "lost", count: true, label: t + ": events missed"},
		{key: k + "tried", count: true, label: fmt.Sprintf("%s: new connections tried (one every %s)", t, probeEvery)},
		{key: k + "newfailed", count: true, sum: true, label: t + ": failed new connections, total of all reps", goal: zero},
		{key: k + "new50", label: t + ": new connection, connect to ACK p50 ms"},
		{key: k + "new99", label: t + ": new connection, connect to ACK p99 ms", goal: atMost(200, "ms")},
		{key: k + "newmax", label: t + ": new connection, connect to ACK max ms"},
		{key: k + "cpu", label: fmt.Sprintf("%s: proxy CPU s in the first %s (old and new processes)", t, stormBaseWindow(upgradeStorm))},
		{key: k + "rss", label: t + ": proxy peak RSS MB"},
		{key: k + "load", label: t + ": load average at the start"},
	}
}

// recordUpgrade adds the upgrade storm's own figures.
func (r *runner) recordUpgrade(name string, res watchResult) {
	k := "st-" + upgradeStorm + "-"
	add := func(m string, v float64) { r.res.add(k+m, name, v) }
	add("cut", float64(res.Disrupted))
	add("tried", float64(res.Probes))
	add("newfailed", float64(res.ProbeFailed))
	add("new50", res.ProbeP50ms)
	add("new99", res.ProbeP99ms)
	add("newmax", res.ProbeMaxMs)
	fmt.Fprintf(r.log, "bench:   upgrade   %s: %d watches cut, %d new connections, %d failed (first: %s), connect to ACK p50 %.1f ms p99 %.1f ms max %.1f ms\n",
		name, res.Disrupted, res.Probes, res.ProbeFailed, res.ProbeFirstError, res.ProbeP50ms, res.ProbeP99ms, res.ProbeMaxMs)
}

// runtimeDir is the stand-in for vipproxy.service's RuntimeDirectory=.
func (r *runner) runtimeDir() string {
	return filepath.Join(r.dir, "run")
}

// preStop runs `vipproxy prestop` as vipproxy.service's ExecStop=+ does
// on a restart. As there, a failure leaves the daemon to drain: the
// storm's figures then show it, so it is only logged.
func (r *runner) preStop(ctx context.Context, pid int) {
	out, err := exec.CommandContext(ctx, r.opt.Vipproxy, "prestop", "--pid="+strconv.Itoa(pid), "--job", "restart",
		"--control", filepath.Join(r.runtimeDir(), "control.sock")).CombinedOutput()
	fmt.Fprintf(r.log, "bench:   vipproxy prestop: %s", out)
	if err != nil {
		fmt.Fprintf(r.log, "bench:   vipproxy prestop: %v\n", err)
	}
}
