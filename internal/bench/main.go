// Package bench measures vipproxy against a direct connection, HAProxy and
// nginx on loopback: throughput, connection rate, latency, idle memory,
// failover, start-up time and binary size. It runs as `vipproxy-bench`,
// whose subcommands are also its own helper processes (backends, load).
package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// Main runs vipproxy-bench with args and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "backend":
			return backendMain(ctx, args[1:], stderr)
		case "load":
			return loadMain(ctx, args[1:], stdin, stdout, stderr)
		case "naive":
			return baselineMain(ctx, "naive", runNaive, args[1:], stderr)
		case "floor":
			return baselineMain(ctx, "floor", runFloor, args[1:], stderr)
		case "watch-backend":
			return watchBackendMain(ctx, args[1:], stderr)
		case "watch":
			return watchClientMain(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	return runMain(ctx, args, stdout, stderr)
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipproxy-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt options
	var contenders, figures string
	fs.IntVar(&opt.Reps, "reps", 5, "interleaved repetitions of every figure (medians are reported)")
	fs.DurationVar(&opt.Duration, "duration", 2*time.Second, "length of one throughput, rate or latency run")
	fs.IntVar(&opt.IdleConns, "idle", 9900, "idle connections to hold")
	fs.DurationVar(&opt.IdleSettle, "idle-settle", 2*time.Second, "how long the idle connections stay idle before memory is measured")
	fs.IntVar(&opt.FailoverRate, "failover-rate", 200, "new connections per second during failover")
	fs.StringVar(&opt.Pin, "pin", "one", "core layout: one (everything on cpu 1), split (proxy cpu 1, load cpu 0), none")
	fs.IntVar(&opt.Nice, "nice", -10, "nice level of everything the bench starts (negative: ahead of other work on a shared machine)")
	fs.StringVar(&opt.Vipproxy, "vipproxy", "bin/vipproxy", "the vipproxy binary")
	fs.StringVar(&contenders, "contenders", "direct,vipproxy,haproxy,nginx,floor", "contenders in interleaving order (also: naive, a plain tcpproxy)")
	fs.StringVar(&figures, "figures", "bulk,connrate,syscalls,pingpong,idle,failover,ready,size,storm", "figure groups to run")
	fs.StringVar(&opt.SizeDir, "size-dir", "", "directory with vipproxy-linux-{amd64,arm64,riscv64} to report sizes")
	fs.StringVar(&opt.Out, "out", "", "also write the table as markdown to this file")
	fs.StringVar(&opt.CPUProfileDir, "cpuprofile-dir", "", "ask vipproxy for a CPU profile here (VIPPROXY_CPUPROFILE)")
	fs.IntVar(&opt.StormClients, "storm-clients", 0, stormClientsUsage())
	fs.IntVar(&opt.StormReps, "storm-reps", 1, "repetitions of each storm")
	var storms string
	fs.StringVar(&storms, "storms", strings.Join(stormScenarios, ","), "storm scenarios to run")
	var alt string
	fs.StringVar(&alt, "alt", "", "other vipproxy builds as extra contenders: label=path,... (then list the labels in --contenders)")
	fs.StringVar(&opt.UpgradeFrom, "upgrade-from", "", "the upgrade storm's vipproxy runs this build first (a path or an --alt label) and is restarted into its own: a binary upgrade; default: the same build")
	fs.StringVar(&opt.PerfDir, "perf-dir", "", "record with perf here: vipproxy, one file per figure group, and every proxy during a backend-SIGKILL storm (give an unstripped --vipproxy)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opt.Alt = map[string]string{}
	for _, a := range splitList(alt) {
		label, path, ok := strings.Cut(a, "=")
		if !ok || label == "" || path == "" {
			fmt.Fprintf(stderr, "vipproxy-bench: --alt %q: want label=path\n", a)
			return 2
		}
		opt.Alt[label] = path
	}
	if p, ok := opt.Alt[opt.UpgradeFrom]; ok {
		opt.UpgradeFrom = p
	}
	opt.Contenders = splitList(contenders)
	opt.Figures = splitList(figures)
	opt.Storms = splitList(storms)
	if opt.Reps < 1 || opt.Reps > 20 || opt.Duration <= 0 || opt.Duration > time.Minute || opt.IdleConns < 1 || opt.IdleSettle < 0 || opt.IdleSettle > time.Minute || opt.FailoverRate < 1 || opt.Nice < -20 || opt.Nice > 19 ||
		opt.StormClients < 0 || opt.StormClients > stormClientsLimit || opt.StormReps < 1 || opt.StormReps > 20 {
		fmt.Fprintf(stderr, "vipproxy-bench: --reps 1..20, --duration up to 1m, --idle and --failover-rate > 0, --nice -20..19, --storm-clients 0..%d, --storm-reps 1..20\n", stormClientsLimit)
		return 2
	}
	return exitCode(stderr, "vipproxy-bench", run(ctx, opt, stdout, stderr))
}

func backendMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve the bench protocol on")
	idLogPath := fs.String("id-log", "", "append the ids of tagged connections to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var idLog *os.File
	if *idLogPath != "" {
		f, err := os.OpenFile(*idLogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "vipproxy-bench backend: %v\n", err)
			return 1
		}
		defer f.Close()
		idLog = f
	}
	return exitCode(stderr, "vipproxy-bench backend", runBackend(ctx, *listen, idLog))
}

func loadMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec loadSpec
	var targets string
	fs.StringVar(&spec.Kind, "kind", "", "bulk-up, bulk-down, connrate, pingpong, idle or failover")
	fs.StringVar(&targets, "targets", "", "comma-separated addresses")
	fs.IntVar(&spec.Conns, "conns", 1, "streams, workers or connections")
	fs.DurationVar(&spec.Duration, "duration", 2*time.Second, "run length (idle: longest hold)")
	fs.IntVar(&spec.Size, "size", 64, "ping-pong message size")
	fs.IntVar(&spec.Rate, "rate", 200, "failover: new connections per second")
	fs.IntVar(&spec.Sources, "sources", 1, "loopback source addresses to use (127.0.0.1..N)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	spec.Targets = splitList(targets)
	if spec.Duration <= 0 || spec.Duration > 5*time.Minute || spec.Rate < 0 || spec.Size < 0 || spec.Sources > 250 ||
		(spec.Kind == "failover" && spec.Rate < 1) || (spec.Kind == "pingpong" && spec.Size < 1) {
		fmt.Fprintln(stderr, "vipproxy-bench load: --duration up to 5m, --rate and --size > 0 where used, --sources up to 250")
		return 2
	}
	return exitCode(stderr, "vipproxy-bench load", runLoad(ctx, spec, stdin, stdout))
}

// baselineMain runs one of the bench's own reference proxies.
func baselineMain(ctx context.Context, name string, run func(ctx context.Context, listen string, backends []string) error, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	backends := fs.String("backends", "", "comma-separated backend addresses")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return exitCode(stderr, "vipproxy-bench "+name, run(ctx, *listen, splitList(*backends)))
}

// exitCode is a subcommand's exit status after err: 0 when nil, else 1
// with "cmd: err" on stderr.
func exitCode(stderr io.Writer, cmd string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func watchBackendMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("watch-backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve TLS watches on")
	pkiDir := fs.String("pki", "", "directory of the test PKI (internal/testpki)")
	var b watchBackend
	fs.IntVar(&b.id, "id", 1, "this backend's number, sent in every ACK")
	fs.DurationVar(&b.period, "period", 2*time.Second, "time between events")
	epoch := fs.Int64("epoch", 0, "the event clock's start, Unix milliseconds (the same for every backend)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if b.period <= 0 || *epoch <= 0 {
		fmt.Fprintln(stderr, "vipproxy-bench watch-backend: --period > 0 and --epoch are required")
		return 2
	}
	b.epoch = time.UnixMilli(*epoch)
	cfg, err := testpki.Load(*pkiDir).ServerTLS()
	if err == nil {
		b.tls = cfg
		err = b.run(ctx, *listen)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vipproxy-bench watch-backend: %v\n", err)
		return 1
	}
	return 0
}

func watchClientMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec watchSpec
	pkiDir := fs.String("pki", "", "directory of the test PKI (internal/testpki)")
	targets := fs.String("target", "", "the proxy's address (or addresses, comma-separated, used round-robin)")
	fs.IntVar(&spec.Clients, "clients", 100, "watches to hold")
	fs.IntVar(&spec.Sources, "sources", 8, "loopback source addresses to use (127.0.0.1..N)")
	fs.DurationVar(&spec.Period, "period", 2*time.Second, "the backends' time between events")
	fs.BoolVar(&spec.AtOnce, "at-once", false, "start every watch at once and report when all work (no stdin commands)")
	fs.DurationVar(&spec.Wait, "wait", 90*time.Second, "how long to wait for every watch to work again")
	fs.DurationVar(&spec.ProbeEvery, "probe-every", 0, "from the mark, open a new connection this often and report their delays (0: none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	spec.Targets = splitList(*targets)
	if len(spec.Targets) == 0 || spec.Clients < 1 || spec.Period <= 0 || spec.Wait <= 0 || spec.Wait > 10*time.Minute || spec.Sources < 1 || spec.Sources > 250 ||
		(spec.ProbeEvery != 0 && spec.ProbeEvery < time.Millisecond) {
		fmt.Fprintln(stderr, "vipproxy-bench watch: --target, --clients >= 1, --period > 0, --wait up to 10m, --sources 1..250, --probe-every 0 or at least 1ms")
		return 2
	}
	cfg, err := testpki.Load(*pkiDir).ClientTLS()
	if err == nil {
		// kubelets reach the VIP by address: verified against the
		// certificate's IP SAN, and no SNI is sent.
		cfg.ServerName = "127.0.0.1"
		err = runWatchClient(ctx, spec, cfg, stdin, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vipproxy-bench watch: %v\n", err)
		return 1
	}
	return 0
}
