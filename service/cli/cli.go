// Package cli implements the vipproxy command line: one file per command,
// each a function from arguments to an exit code.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/vipproxy/vipproxy/service/config"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and something is wrong (verification failed, not ready)
	ExitUsage   = 2 // bad arguments or a bad config file
)

// Env is what a command may touch: its streams and the build version.
type Env struct {
	Stdout, Stderr io.Writer
	Version        string
}

type command struct {
	summary string
	run     func(ctx context.Context, env Env, args []string) int
}

func commands() map[string]command {
	return map[string]command{
		"serve":      {"run the proxy (socket-activated under systemd)", runServe},
		"check":      {"validate a config and print the effective config", runCheck},
		"probe":      {"exit 0 only if the local daemon is ready (keepalived track script)", runProbe},
		"network":    {"render|apply|check|remove the dummy link, VIP and ARP sysctls", runNetwork},
		"keepalived": {"render the keepalived vrrp_instance and vrrp_script", runKeepalived},
		"units":      {"render the vipproxy.socket drop-in with the VIP listeners", runUnits},
		"version":    {"print the version", runVersion},
	}
}

// Main runs the command named by args[0] and returns the exit code.
func Main(ctx context.Context, env Env, args []string) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "vipproxy: unknown command %q\n", args[0])
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	return cmd.run(ctx, env, args[1:])
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: vipproxy COMMAND [--config FILE] [flags]")
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
}

// newFlags makes a FlagSet for a command with the shared --config flag.
func newFlags(env Env, name string, configPath *string) *flag.FlagSet {
	fs := flag.NewFlagSet("vipproxy "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.StringVar(configPath, "config", config.DefaultPath, "config file")
	return fs
}

// loadConfig loads the config and reports an error on stderr; ok is false
// when the caller should exit with ExitUsage.
func loadConfig(env Env, path string) (*config.Config, bool) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy: %v\n", err)
		return nil, false
	}
	return cfg, true
}

func runVersion(_ context.Context, env Env, _ []string) int {
	fmt.Fprintf(env.Stdout, "vipproxy %s\n", env.Version)
	return ExitOK
}
