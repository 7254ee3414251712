package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/keepalived"
)

// runKeepalived prints (or writes with --out, atomically; --diff: dry run) the keepalived
// vrrp_script and vrrp_instance for the VIPs.
func runKeepalived(_ context.Context, env Env, args []string) int {
	var path, out string
	var diff bool
	fs := newFlags(env, "keepalived", &path)
	fs.StringVar(&out, "out", "", "write to this file (atomically) instead of stdout")
	fs.BoolVar(&diff, "diff", false, "with --out: show what would change in the file and write nothing")
	cfg, code, ok := parseFlagsAndConfig(env, fs, args)
	if !ok {
		return code
	}
	if !cfg.VIP.Mode.UsesKeepalived() {
		// Nothing written, not even an empty file: keepalived would start
		// with no instance and an operator would think the VIP is managed.
		fmt.Fprintf(env.Stderr, "vipproxy keepalived: vip.mode = %q runs no keepalived: there is no VRRP instance to render (%s)\n"+
			"  fix: on this node, systemctl disable --now keepalived.service%s\n", cfg.VIP.Mode, noKeepalivedWhy(cfg.VIP.Mode), noKeepalivedFix(cfg.VIP.Mode))
		return ExitFailure
	}
	return writeRendered(env, "keepalived", out, diff, keepalived.Render(cfg))
}

func noKeepalivedWhy(m config.VIPMode) string {
	if m.UsesBGP() {
		return "BIRD announces the VIP by BGP: vipproxy bird renders its file"
	}
	return "the VIP is a loopback address of this node only"
}

func noKeepalivedFix(m config.VIPMode) string {
	if m.UsesBGP() {
		return ""
	}
	return fmt.Sprintf("; use vip.mode = %q on the controller nodes that share a VIP", config.ModeVRRP)
}

// writeRendered prints data, or writes it to out atomically, or with diff
// shows what writing it would change; cmd names the command in errors.
func writeRendered(env Env, cmd, out string, diff bool, data []byte) int {
	if out == "" {
		env.Stdout.Write(data)
		return ExitOK
	}
	f := atomicfile.File{Path: out, Data: data, Perm: 0o644}
	if diff {
		printDiffs(env.Stdout, []atomicfile.File{f})
		return ExitOK
	}
	if _, err := atomicfile.WriteSet([]atomicfile.File{f}, nil); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy %s: %v\n", cmd, err)
		return ExitFailure
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", out)
	return ExitOK
}
