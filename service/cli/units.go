package cli

import (
	"context"
	"fmt"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/units"
)

const unitsUsage = "usage: vipproxy units render|write [--config FILE] [--root DIR] [--diff]\n" +
	"  render  print the vipproxy.socket drop-in with one ListenStream= per VIP\n" +
	"  write   write it (--diff: show what would change, write nothing)"

// RestartSocketHint is what to run after the socket's listeners changed:
// systemd binds a socket unit's listeners only when the unit starts, and
// neither daemon-reload nor a restart of vipproxy.service rebinds them.
const RestartSocketHint = "systemctl daemon-reload && systemctl restart vipproxy.socket"

// runUnits prints (render) or writes (write) the vipproxy.socket drop-in.
func runUnits(_ context.Context, env Env, args []string) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(env.Stdout, unitsUsage)
		return ExitOK
	}
	if len(args) == 0 || args[0] != "render" && args[0] != "write" {
		fmt.Fprintln(env.Stderr, unitsUsage)
		return ExitUsage
	}
	sub := args[0]
	var path, root string
	var diff bool
	fs := newFlags(env, "units "+sub, &path)
	fs.StringVar(&root, "root", "/", "the file's path is under this directory")
	if sub == "write" {
		fs.BoolVar(&diff, "diff", false, "show what would change and write nothing")
	}
	if code, ok := parseFlags(env, fs, args[1:]); !ok {
		return code
	}
	cfg, ok := loadConfig(env, path)
	if !ok {
		return ExitUsage
	}
	f := units.SocketDropIn(cfg, root)
	switch {
	case sub == "render":
		printFiles(env.Stdout, []atomicfile.File{f})
		return ExitOK
	case diff:
		if printDiffs(env.Stdout, []atomicfile.File{f}) > 0 {
			fmt.Fprintf(env.Stdout, "after writing it: %s\n", RestartSocketHint)
		}
		return ExitOK
	}
	changed, err := atomicfile.WriteSet([]atomicfile.File{f}, nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units write: %v\n", err)
		return ExitFailure
	}
	if len(changed) == 0 {
		fmt.Fprintf(env.Stdout, "unchanged %s\n", f.Path)
		return ExitOK
	}
	fmt.Fprintf(env.Stdout, "wrote %s\nnow run: %s (the socket binds the VIP only when it starts; restarting vipproxy.service is not enough)\n", f.Path, RestartSocketHint)
	return ExitOK
}
