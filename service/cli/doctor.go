package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/doctor"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// runDoctor runs the host checks and prints each as PASS, WARN or FAIL
// (with the fix) or SKIP: exit 0 when none failed, 1 otherwise, 2 on a
// bad config.
func runDoctor(ctx context.Context, env Env, args []string) int {
	var path, only, addr, control, birdSocket string
	var asJSON bool
	h := doctor.Host{}
	fs := newFlags(env, "doctor", &path)
	fs.StringVar(&only, "only", "", "run only these checks, comma-separated: "+strings.Join(doctor.Checks(), ","))
	fs.StringVar(&h.Root, "root", "/", "look for the drop-ins under this directory")
	fs.StringVar(&h.Proc, "proc", "/proc", "the proc file system to read listeners and processes from")
	fs.StringVar(&h.KeepalivedConf, "keepalived-conf", "", "keepalived's main config file (default: the one the running keepalived reads, as systemd and /proc tell; else "+doctor.DefaultKeepalivedConf+")")
	fs.DurationVar(&h.DialTimeout, "timeout", 2*time.Second, "how long to wait for each backend")
	fs.BoolVar(&asJSON, "json", false, "print the results as JSON")
	fs.StringVar(&control, "control", admin.DefaultControlPath(), "the daemon's control socket, asked first (\"\" : only the admin endpoint)")
	fs.StringVar(&addr, "admin", "", adminFlagHelp)
	fs.StringVar(&birdSocket, "bird-socket", "", "BIRD's control socket for birdc (default: birdc's own, /run/bird/bird.ctl)")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	h.Daemon = func(ctx context.Context, urlPath string) (string, int, error) {
		return askDaemon(ctx, path, addr, []string{control}, urlPath, h.DialTimeout)
	}
	cfg, ok := loadConfig(env, path)
	if !ok {
		return ExitUsage
	}
	if nl, err := netcfg.OpenNetlink(); err == nil {
		defer nl.Close()
		h.Netlink = nl
	}
	h.Systemctl = systemctl()
	h.Birdc = birdc(birdSocket)
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
	}
	results, err := doctor.Run(ctx, h, cfg, names)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy doctor: %v\n", err)
		return ExitUsage
	}
	printResults(env, results, asJSON)
	if doctor.Failed(results) {
		return ExitFailure
	}
	return ExitOK
}

func printResults(env Env, results []doctor.Result, asJSON bool) {
	if asJSON {
		b, _ := json.MarshalIndent(results, "", "  ")
		fmt.Fprintf(env.Stdout, "%s\n", b)
		return
	}
	for _, r := range results {
		fmt.Fprintf(env.Stdout, "%s %-10s %s\n", r.Status, r.Check, r.Detail)
		if r.Fix != "" {
			fmt.Fprintf(env.Stdout, "     %-10s fix: %s\n", "", r.Fix)
		}
	}
}

// birdc runs birdc (on socket, when given), or is nil where it is not
// installed.
func birdc(socket string) func(ctx context.Context, args ...string) (string, error) {
	bin, err := exec.LookPath("birdc")
	if err != nil {
		return nil
	}
	if socket != "" {
		return runner(bin, "-s", socket)
	}
	return runner(bin)
}

// runner runs bin with the leading args and then a call's, for at most
// 10 s, and returns its combined output.
func runner(bin string, leading ...string) func(ctx context.Context, args ...string) (string, error) {
	return func(ctx context.Context, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append(append([]string(nil), leading...), args...)...).CombinedOutput()
		return string(out), err
	}
}

// systemctl runs the host's systemctl, or is nil where systemd is not
// running (a container, a network namespace test without it).
func systemctl() func(ctx context.Context, args ...string) (string, error) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return nil
	}
	bin, err := exec.LookPath("systemctl")
	if err != nil {
		return nil
	}
	return runner(bin)
}
