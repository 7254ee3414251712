package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/keepalived"
)

// keepalivedFile is where `keepalived write` writes by default: the
// directory Debian's keepalived.conf is made to include (README.md).
const keepalivedFile = "/etc/keepalived/conf.d/vipproxy.conf"

// runKeepalived prints (render) or writes (write, atomically; --diff: dry
// run) the keepalived vrrp_script and vrrp_instance for the VIPs.
func runKeepalived(_ context.Context, env Env, args []string) int {
	return renderCommand{
		name:    "keepalived",
		outFile: keepalivedFile,
		refusal: noKeepalivedFile,
		render:  keepalived.Render,
	}.run(env, args)
}

// noKeepalivedFile: nothing is written, not even an empty file, in a mode
// without keepalived: it would start with no instance and an operator
// would think the VIP is managed.
func noKeepalivedFile(cfg *config.Valid) string {
	if cfg.VIP.Mode.UsesKeepalived() {
		return ""
	}
	return fmt.Sprintf("vip.mode = %q runs no keepalived: there is no VRRP instance to render (%s)\n"+
		"  fix: on this node, systemctl disable --now keepalived.service%s", cfg.VIP.Mode, noKeepalivedWhy(cfg.VIP.Mode), noKeepalivedFix(cfg.VIP.Mode))
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
