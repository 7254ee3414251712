package cli

import (
	"bytes"
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/keepalived"
)

// runCheck validates a config (and optionally a keepalived.conf against
// it) and prints the effective config: exit 0, or the error and exit 2.
func runCheck(_ context.Context, env Env, args []string) int {
	var configPath, keepalivedConf string
	var quiet bool
	fs := newFlags(env, "check", &configPath)
	fs.BoolVar(&quiet, "quiet", false, "print nothing when the config is valid (ExecStartPre=)")
	fs.StringVar(&keepalivedConf, "keepalived-conf", "", "also check this keepalived.conf: no virtual_server for the VIP, no other vrrp_instance holding it, no vrrp_strict, strict_mode or no_accept (what doctor's keepalived check rejects)")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	cfg, ok := loadConfigNote(env, configPath, !quiet)
	if !ok {
		return ExitUsage
	}
	if keepalivedConf != "" {
		k, err := keepalived.Read(keepalivedConf, "")
		if err == nil {
			err = k.CheckVIPReachable(cfg)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "vipproxy: %v\n", err)
			return ExitUsage
		}
	}
	if quiet {
		return ExitOK
	}
	var out bytes.Buffer
	if err := cfg.Encode(&out); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy: %v\n", err)
		return ExitFailure
	}
	if _, err := env.Stdout.Write(out.Bytes()); err != nil {
		return ExitFailure
	}
	return ExitOK
}
