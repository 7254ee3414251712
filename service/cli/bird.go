package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/bird"
	"github.com/vipproxy/vipproxy/service/config"
)

// runBird prints (or writes with --out, atomically; --diff: dry run) the
// BIRD 2 include file that announces the VIPs by BGP (vip.mode = "bgp").
func runBird(_ context.Context, env Env, args []string) int {
	var path, out string
	var diff bool
	fs := newFlags(env, "bird", &path)
	fs.StringVar(&out, "out", "", "write to this file (atomically) instead of stdout, e.g. /etc/bird/vipproxy.conf")
	fs.BoolVar(&diff, "diff", false, "with --out: show what would change in the file and write nothing")
	cfg, code, ok := parseFlagsAndConfig(env, fs, args)
	if !ok {
		return code
	}
	if !cfg.VIP.Mode.UsesBGP() {
		// Nothing written: BIRD would announce nothing and an operator would
		// think the VIP is routed.
		fmt.Fprintf(env.Stderr, "vipproxy bird: vip.mode = %q announces no VIP by BGP: there is nothing to render\n"+
			"  fix: set vip.mode = %q and a [bgp] table (examples/bgp.toml), or leave BIRD alone on this node\n", cfg.VIP.Mode, config.ModeBGP)
		return ExitFailure
	}
	return writeRendered(env, "bird", out, diff, bird.Render(cfg))
}
