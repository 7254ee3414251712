package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/listen"
	"github.com/vipproxy/vipproxy/service/units"
)

// RestartSocketHint is what to run after the socket's listeners changed.
const RestartSocketHint = listen.RestartHint

// runUnits prints (render) or writes (write) the vipproxy.socket drop-in.
func runUnits(_ context.Context, env Env, args []string) int {
	if code, ok := subcommand(env, "units", args); !ok {
		return code
	}
	sub := args[0]
	var path, root string
	var diff bool
	fs := newFlags(env, "units "+sub, &path)
	fs.StringVar(&root, "root", "/", "the file's path is under this directory")
	if sub == "write" {
		fs.BoolVar(&diff, "diff", false, "show what would change and write nothing")
	}
	cfg, code, ok := parseFlagsAndConfig(env, fs, args[1:])
	if !ok {
		return code
	}
	files := units.Sockets(cfg, root)
	creds, named, err := units.Credentials(cfg, root)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units %s: %v\n", sub, err)
		return ExitFailure
	}
	if named && (sub == "render" || units.OwnCredentials(creds.Path)) {
		files = append(files, creds)
	} else if named {
		fmt.Fprintf(env.Stderr, "vipproxy units %s: left %s as it is (not written by vipproxy); what vipproxy would write:\n%s", sub, creds.Path, creds.Data)
	}
	stale := units.Stale(cfg, root)
	if sub == "render" {
		printFiles(env.Stdout, files)
		return ExitOK
	}
	// The ports after the first need the template unit: installed where
	// systemd finds none.
	if tmpl, ok := units.PortTemplate(cfg, root); ok {
		files = append(files, tmpl)
	}
	switch {
	case diff:
		n := printDiffs(env.Stdout, files)
		for _, f := range stale {
			fmt.Fprintf(env.Stdout, "would remove %s\n", f)
		}
		if n+len(stale) > 0 {
			fmt.Fprintf(env.Stdout, "after writing: %s\n", RestartSocketHint)
		}
		return ExitOK
	}
	return writeUnits(env, cfg, root, files)
}

// writeUnits writes the socket drop-ins, removes stale ones and says what
// to run next.
func writeUnits(env Env, cfg *config.Valid, root string, files []atomicfile.File) int {
	changed, err := atomicfile.WriteSet(files, nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units write: %v\n", err)
		return ExitFailure
	}
	removed, err := units.RemoveStale(cfg, root)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy units write: remove a stale drop-in: %v\n", err)
		return ExitFailure
	}
	if len(changed)+len(removed) == 0 {
		for _, f := range files {
			fmt.Fprintf(env.Stdout, "unchanged %s\n", f.Path)
		}
		return ExitOK
	}
	for _, f := range changed {
		fmt.Fprintf(env.Stdout, "wrote %s\n", f)
	}
	for _, f := range removed {
		fmt.Fprintf(env.Stdout, "removed %s (stop its socket: systemctl stop %s)\n", f, strings.TrimSuffix(filepath.Base(filepath.Dir(f)), ".d"))
	}
	fmt.Fprintf(env.Stdout, "now run: %s (the socket binds the VIP only when it starts; restarting vipproxy.service is not enough)\n", RestartSocketHint)
	if slices.ContainsFunc(changed, func(f string) bool { return strings.HasSuffix(f, units.CredentialsDropIn) }) {
		fmt.Fprintln(env.Stdout, "and: systemctl restart vipproxy (its credentials are copied when it starts)")
	}
	return ExitOK
}
