package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/bird"
	"github.com/vipproxy/vipproxy/service/config"
)

// birdFile is where `bird write` writes by default, beside Debian's
// /etc/bird/bird.conf, which includes it (docs/bgp.md).
const birdFile = "/etc/bird/vipproxy.conf"

// runBird prints (render) or writes (write, atomically; --diff: dry run)
// the BIRD 2 include file that announces the VIPs by BGP (vip.mode = "bgp").
func runBird(_ context.Context, env Env, args []string) int {
	return renderCommand{
		name:    "bird",
		outFile: birdFile,
		refusal: noBirdFile,
		render:  bird.Render,
	}.run(env, args)
}

// noBirdFile: nothing is written outside bgp mode: BIRD would announce
// nothing and an operator would think the VIP is routed.
func noBirdFile(cfg *config.Valid) string {
	if cfg.VIP.Mode.UsesBGP() {
		return ""
	}
	return fmt.Sprintf("vip.mode = %q announces no VIP by BGP: there is nothing to render\n"+
		"  fix: set vip.mode = %q and a [bgp] table (examples/bgp.toml), or leave BIRD alone on this node", cfg.VIP.Mode, config.ModeBGP)
}
