package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/units"
)

// runUnits writes the vipproxy.socket drop-in with one ListenStream per VIP.
// Run `systemctl daemon-reload` and restart vipproxy.socket afterwards.
func runUnits(_ context.Context, env Env, args []string) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(env.Stdout, "usage: vipproxy units render [--config FILE] [--root DIR]")
		return ExitOK
	}
	if len(args) == 0 || args[0] != "render" {
		fmt.Fprintln(env.Stderr, "usage: vipproxy units render [--config FILE] [--root DIR]")
		return ExitUsage
	}
	var path, root string
	fs := newFlags(env, "units render", &path)
	fs.StringVar(&root, "root", "/", "write under this directory instead of /")
	if code, ok := parseFlags(env, fs, args[1:]); !ok {
		return code
	}
	cfg, ok := loadConfig(env, path)
	if !ok {
		return ExitUsage
	}
	f, err := units.SocketDropIn(cfg, root)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units render: %v\n", err)
		return ExitUsage
	}
	changed, err := atomicfile.WriteSet([]atomicfile.File{f}, nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units render: %v\n", err)
		return ExitFailure
	}
	if len(changed) == 0 {
		fmt.Fprintf(env.Stdout, "unchanged %s\n", f.Path)
	} else {
		fmt.Fprintf(env.Stdout, "wrote %s (run systemctl daemon-reload)\n", f.Path)
	}
	return ExitOK
}
