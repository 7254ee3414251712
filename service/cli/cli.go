// Package cli implements the vipproxy command line: one file per command,
// each a function from arguments to an exit code.
//
// Conventions (GNU and the Go tools): `vipproxy --help`, `-h`, `help` and
// `vipproxy COMMAND --help` print usage on stdout and exit 0; `--version`
// prints the version; a wrong flag or command prints the error and usage on
// stderr and exits 2.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

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
		"network":    {networkVerbs + " the dummy link, VIP and ARP sysctls", runNetwork},
		"keepalived": {"print (or write with --out) the keepalived vrrp_instance and vrrp_script", runKeepalived},
		"announce":   {"hold the VIP on the BGP announce link while the local daemon is ready (vip.mode = bgp)", runAnnounce},
		"bird":       {"print (or write with --out) the BIRD 2 include file announcing the VIP by BGP (vip.mode = bgp)", runBird},
		"units":      {"render|write the vipproxy.socket drop-in with the VIP listeners", runUnits},
		"doctor":     {"check the host (VIP port, link, ARP, drop-ins, keepalived or BGP, backends): PASS/FAIL with the fix", runDoctor},
		"reload":     {"validate the config, SIGHUP the daemon, exit 1 if it refused the file (ExecReload=)", runReload},
		"status":     {"the daemon's state for a person: backends, VIP, keepalived, last reload (--json)", runStatus},
		"version":    {"print the version", runVersion},
	}
}

// Main runs the command named by args[0] and returns the exit code.
func Main(ctx context.Context, env Env, args []string) int {
	cmds := commands()
	if len(args) == 0 {
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(env.Stdout, cmds)
		return ExitOK
	case "help":
		if len(args) > 1 {
			return Main(ctx, env, []string{args[1], "--help"})
		}
		usage(env.Stdout, cmds)
		return ExitOK
	case "--version", "-version":
		return runVersion(ctx, env, nil)
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		what := "command"
		if strings.HasPrefix(args[0], "-") {
			what = "flag"
		}
		fmt.Fprintf(env.Stderr, "vipproxy: unknown %s %q\n", what, args[0])
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
	fmt.Fprintln(w, "       vipproxy help COMMAND | --help | --version")
	fmt.Fprintln(w, "commands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
}

// newFlags makes a FlagSet for a command with the shared --config flag.
// Parse it with parseFlags, which follows the help and exit conventions.
func newFlags(env Env, name string, configPath *string) *flag.FlagSet {
	fs := flag.NewFlagSet("vipproxy "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {} // parseFlags prints usage where it belongs
	fs.StringVar(configPath, "config", config.DefaultPath, "config file")
	return fs
}

// parseFlags parses args. ok is false when the command should return code
// at once: 0 after --help (usage on stdout), 2 after a bad flag or any
// argument that is not a flag (the error and usage on stderr). No command
// takes one, and the flag package stops at the first: `network write
// --config F stray --diff` wrote the files, its --diff dropped unseen, and
// `keepalived my.toml` rendered /etc/vipproxy/vipproxy.toml instead.
func parseFlags(env Env, fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil && fs.NArg() == 0:
		return ExitOK, true
	case err == nil:
		fmt.Fprintf(env.Stderr, "%s: unexpected argument %q (only flags are taken; the config file is --config FILE)\n", fs.Name(), fs.Arg(0))
	case errors.Is(err, flag.ErrHelp):
		flagUsage(env.Stdout, fs)
		return ExitOK, false
	}
	flagUsage(env.Stderr, fs) // the flag package printed its own errors
	return ExitUsage, false
}

// parseFlagsAndConfig parses args as parseFlags does, then loads the
// config file that --config names (see newFlags). ok is false when the
// command should return code at once: as parseFlags, or 2 when the config
// is refused.
func parseFlagsAndConfig(env Env, fs *flag.FlagSet, args []string) (cfg *config.Valid, code int, ok bool) {
	if code, ok := parseFlags(env, fs, args); !ok {
		return nil, code, false
	}
	if cfg, ok = loadConfig(env, fs.Lookup("config").Value.String()); !ok {
		return nil, ExitUsage, false
	}
	return cfg, ExitOK, true
}

// unknownSubcommand says that sub is none of cmd's subcommands, and how
// cmd is used.
func unknownSubcommand(env Env, cmd, sub, usage string) int {
	fmt.Fprintf(env.Stderr, "vipproxy %s: unknown subcommand %q\n%s\n", cmd, sub, usage)
	return ExitUsage
}

func flagUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [flags]\nflags:\n", fs.Name())
	prev := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(prev)
}

// loadConfig loads the config and reports an error on stderr; ok is false
// when the caller should exit with ExitUsage.
func loadConfig(env Env, path string) (*config.Valid, bool) {
	cfg, err := config.Load(path)
	if err != nil {
		// One line per problem: config.Validate reports every one.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(env.Stderr, "vipproxy: %s\n", line)
		}
		return nil, false
	}
	return cfg, true
}

// runVersion prints the version. It parses its arguments as every command
// does (--config is taken and unused, as docs/operations.md says every
// command takes it), so --help prints usage and a wrong flag exits 2.
func runVersion(_ context.Context, env Env, args []string) int {
	var path string
	if code, ok := parseFlags(env, newFlags(env, "version", &path), args); !ok {
		return code
	}
	fmt.Fprintf(env.Stdout, "vipproxy %s\n", env.Version)
	return ExitOK
}

// isHelp reports whether arg asks for help (for commands with a
// subcommand, where the flag package has not run yet).
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}
