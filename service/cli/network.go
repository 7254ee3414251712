package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// runNetwork sets up the VIP link and the uplink ARP sysctls; see netcfg.
func runNetwork(ctx context.Context, env Env, args []string) int {
	if code, ok := subcommand(env, "network", args); !ok {
		return code
	}
	sub := args[0]
	var path, root string
	var useNetlink, diff bool
	var wait time.Duration
	fs := newFlags(env, "network "+sub, &path)
	switch sub {
	case "render", "write", "apply", "remove":
		fs.StringVar(&root, "root", "/", "the files' paths are under this directory instead of /")
	}
	if sub == "apply" || sub == "remove" {
		fs.BoolVar(&useNetlink, "netlink", false, "create/delete the link and addresses with netlink instead of systemd-networkd")
	}
	if sub == "apply" {
		fs.DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the link and VIP after a reload")
	}
	if sub == "write" || sub == "apply" {
		fs.BoolVar(&diff, "diff", false, "show what would change and change nothing")
	}
	cfg, code, ok := parseFlagsAndConfig(env, fs, args[1:])
	if !ok {
		return code
	}
	if !cfg.VIP.Mode.UsesVIPLink() && sub != "remove" {
		return networkNodeLocal(env, cfg, sub, root)
	}
	if sub == "render" || sub == "write" || diff {
		return networkFiles(env, cfg, sub, root, diff)
	}
	nl, err := netcfg.OpenNetlink()
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy network %s: %v\n", sub, err)
		return ExitFailure
	}
	defer nl.Close()
	host := netcfg.Host{Netlink: nl, Reloader: netcfg.Networkctl{}}
	opts := netcfg.Options{Root: root, Netlink: useNetlink, Wait: wait}
	switch sub {
	case "apply":
		return networkApply(ctx, env, host, cfg, opts)
	case "remove":
		return networkRemove(ctx, env, host, cfg, opts)
	default:
		return reportProblems(env, "check", netcfg.Verify(host.Netlink, host.Sysctl, cfg), "VIP link, addresses and uplink ARP sysctls as configured")
	}
}

// networkNodeLocal answers render, write, apply and check on a node whose
// mode needs no host network setup: nothing is written; what a vrrp setup
// left behind (drop-ins that bring the dummy link back at boot, the link)
// fails write, apply and check with the command that removes it.
func networkNodeLocal(env Env, cfg *config.Valid, sub, root string) int {
	note := netcfg.NodeLocalNote(cfg)
	if sub == "render" {
		fmt.Fprintf(env.Stderr, "vipproxy network render: nothing to render: %s\n", note)
		return ExitOK
	}
	nl, err := netcfg.OpenNetlink()
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy network %s: %v\n", sub, err)
		return ExitFailure
	}
	defer nl.Close()
	if sub == "check" {
		return reportProblems(env, "check", netcfg.VerifyNodeLocal(nl, cfg, "/"), note)
	}
	if left := netcfg.Leftovers(nl, cfg, root); len(left) > 0 {
		fmt.Fprintf(env.Stderr, "vipproxy network %s: %s, but a vrrp setup left %s behind\n  fix: %s\n",
			sub, note, strings.Join(left, ", "), netcfg.LeftoversFix)
		return ExitFailure
	}
	fmt.Fprintf(env.Stdout, "nothing to do: %s\n", note)
	return ExitOK
}

// networkFiles prints (render), diffs (--diff) or writes (write) the
// drop-ins; a dry run of apply also lists the sysctls it would set.
func networkFiles(env Env, cfg *config.Valid, sub, root string, diff bool) int {
	files := netcfg.Render(cfg, root)
	switch {
	case sub == "render":
		printFiles(env.Stdout, files.List())
		return ExitOK
	case diff:
		printDiffs(env.Stdout, files.List())
		if sub == "apply" {
			printSysctlDiff(env, cfg)
		}
		return ExitOK
	}
	changed, err := atomicfile.WriteSet(files.List(), nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy network write: %v\n", err)
		return ExitFailure
	}
	for _, f := range changed {
		fmt.Fprintf(env.Stdout, "wrote %s\n", f)
	}
	if len(changed) == 0 {
		fmt.Fprintln(env.Stdout, "nothing changed")
	}
	return ExitOK
}

// printSysctlDiff lists the uplink sysctls apply would set.
func printSysctlDiff(env Env, cfg *config.Valid) {
	var sys netcfg.Sysctl
	for _, up := range cfg.Network.Uplinks {
		for _, set := range netcfg.UplinkSettings {
			name, want := set.Name, set.Value
			if v, err := sys.Get(up, name); err != nil || v != want {
				fmt.Fprintf(env.Stdout, "would set net.ipv4.conf.%s.%s=%d\n", up, name, want)
			}
		}
	}
}

func networkApply(ctx context.Context, env Env, host netcfg.Host, cfg *config.Valid, opts netcfg.Options) int {
	res, err := host.Apply(ctx, cfg, opts)
	printFilesDone(env, "wrote", res.Changed, res.Reloaded)
	if res.Restarted {
		fmt.Fprintln(env.Stdout, "restarted systemd-networkd (it reads networkd.conf.d at start only)")
	}
	for _, n := range res.Notes {
		fmt.Fprintf(env.Stdout, "note: %s\n", n)
	}
	for _, s := range res.Sysctls {
		fmt.Fprintf(env.Stdout, "set %s\n", s)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy network apply: %v\n", err)
		if errors.As(err, new(*config.Error)) {
			return ExitUsage
		}
		return ExitFailure
	}
	if len(res.Changed) == 0 && len(res.Sysctls) == 0 {
		fmt.Fprintln(env.Stdout, "nothing changed")
	}
	return reportProblems(env, "apply", res.Problems, "VIP link, addresses and uplink ARP sysctls as configured")
}

func networkRemove(ctx context.Context, env Env, host netcfg.Host, cfg *config.Valid, opts netcfg.Options) int {
	res, err := host.Remove(ctx, cfg, opts)
	printFilesDone(env, "removed", res.Removed, res.Reloaded)
	if res.LinkDeleted {
		fmt.Fprintf(env.Stdout, "deleted link %s\n", cfg.Network.Interface)
	}
	if len(res.AddrsGone) > 0 {
		fmt.Fprintf(env.Stdout, "removed %s from %s\n", strings.Join(res.AddrsGone, ", "), cfg.Network.Interface)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy network remove: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}

// printFilesDone prints each networkd file written or removed (what was
// done to it: verb) and whether networkd was reloaded to read them.
func printFilesDone(env Env, verb string, files []string, reloaded bool) {
	for _, f := range files {
		fmt.Fprintf(env.Stdout, "%s %s\n", verb, f)
	}
	if reloaded {
		fmt.Fprintln(env.Stdout, "reloaded systemd-networkd")
	}
}

// reportProblems prints one line per verification problem and maps them to
// the exit code: 0 when none, 1 otherwise.
func reportProblems(env Env, sub string, problems []string, ok string) int {
	if len(problems) == 0 {
		fmt.Fprintln(env.Stdout, "ok: "+ok)
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "vipproxy network %s: %d problem(s):\n", sub, len(problems))
	for _, p := range problems {
		fmt.Fprintln(env.Stderr, p)
	}
	return ExitFailure
}
