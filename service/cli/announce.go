package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/vipproxy/vipproxy/service/announce"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/logging"
	"github.com/vipproxy/vipproxy/service/notify"
)

// runAnnounce holds the VIPs on the announce link (bgp.interface), which
// BIRD exports, while the local daemon is ready (vip.mode = "bgp";
// vipproxy-announce.service). It asks what keepalived's track script asks
// (askReady), and runs apart from the daemon so that the proxy keeps no
// privilege: only this small process has CAP_NET_ADMIN.
func runAnnounce(ctx context.Context, env Env, args []string) int {
	var path string
	fs := newFlags(env, "announce", &path)
	daemon := readyzFlags(fs)
	cfg, code, ok := parseFlagsAndConfig(env, fs, args)
	if !ok {
		return code
	}
	if !cfg.VIP.Mode.UsesBGP() {
		fmt.Fprintf(env.Stderr, "vipproxy announce: vip.mode = %q announces no VIP by BGP\n"+
			"  fix: on this node, systemctl disable --now vipproxy-announce.service; or set vip.mode = %q and a [bgp] table\n", cfg.VIP.Mode, config.ModeBGP)
		return ExitFailure
	}
	log := logging.New(env.Stderr, cfg.Log.Level.Slog(), os.Getenv("JOURNAL_STREAM"))
	n := notify.New(log)
	a := &announce.Announcer{
		Interface: cfg.BGP.Interface, VIPs: cfg.VIP.Addresses, Log: log,
		Ready: func(ctx context.Context) error {
			_, err := daemon.ask(ctx, path, announce.CheckTimeout)
			return err
		},
		Changed: func(announced bool, why string) { n.Status(announceStatus(cfg, announced, why)) },
	}
	n.Ready(announceStatus(cfg, false, "waiting for the proxy to be ready"))
	a.Run(ctx)
	return ExitOK
}

func announceStatus(cfg *config.Valid, announced bool, why string) string {
	if announced {
		return fmt.Sprintf("announcing %v on %s since %s", cfg.VIP.Addresses, cfg.BGP.Interface, time.Now().UTC().Format(time.TimeOnly))
	}
	return fmt.Sprintf("not announcing %v: %s", cfg.VIP.Addresses, why)
}
