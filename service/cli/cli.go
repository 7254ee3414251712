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
	"os"
	"regexp"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and something is wrong (verification failed, not ready)
	ExitUsage   = 2 // bad arguments or a bad config file
)

// Env is what a command may touch: its streams and the build.
type Env struct {
	Stdout, Stderr io.Writer
	Version        string // "unknown" when the build does not say
	Commit         string // "" when the build does not say
	// flagSets, when set, is handed every FlagSet newFlags makes, and
	// parseFlags then stops before the command runs (flagsOf).
	flagSets func(*flag.FlagSet)
}

// Main runs the command named by args[0] and returns the exit code.
func Main(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 {
		writeUsage(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		writeUsage(env.Stdout)
		return ExitOK
	case "--version", "-version":
		return runVersion(ctx, env, nil)
	}
	cmd := lookup(args[:1])
	if cmd == nil {
		what := "command"
		if strings.HasPrefix(args[0], "-") {
			what = "flag"
		}
		fmt.Fprintf(env.Stderr, "vipproxy: unknown %s %q\n", what, args[0])
		writeUsage(env.Stderr)
		return ExitUsage
	}
	return cmd.run(ctx, env, args[1:])
}

// newFlags makes a FlagSet for a command with the shared --config flag.
// Parse it with parseFlags, which follows the help and exit conventions.
func newFlags(env Env, name string, configPath *string) *flag.FlagSet {
	fs := flag.NewFlagSet("vipproxy "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags prints errors and usage where they belong
	fs.Usage = func() {}
	fs.StringVar(configPath, "config", config.DefaultPath, "the config file")
	if env.flagSets != nil {
		env.flagSets(fs)
	}
	return fs
}

// parseFlags parses args. ok is false when the command should return code
// at once: 0 after --help (usage on stdout), 2 after a bad flag or any
// argument that is not a flag (the error and usage on stderr). No command
// takes one, and the flag package stops at the first: `network write
// --config F stray --diff` wrote the files, its --diff dropped unseen, and
// `keepalived my.toml` rendered /etc/vipproxy/vipproxy.toml instead.
func parseFlags(env Env, fs *flag.FlagSet, args []string) (code int, ok bool) {
	if env.flagSets != nil {
		return ExitOK, false // flagsOf asked for the flags only
	}
	err := fs.Parse(args)
	switch {
	case err == nil && fs.NArg() == 0:
		return ExitOK, true
	case err == nil:
		fmt.Fprintf(env.Stderr, "%s: unexpected argument %q (only flags are taken; the config file is --config FILE)\n", fs.Name(), fs.Arg(0))
	case errors.Is(err, flag.ErrHelp):
		printHelp(env, strings.Fields(fs.Name())[1:])
		return ExitOK, false
	default:
		// The flag package names a flag -name; it takes --name too.
		fmt.Fprintf(env.Stderr, "%s: %s\n", fs.Name(), flagNameRE.ReplaceAllString(err.Error(), "$1--$2"))
	}
	writeHelp(env.Stderr, strings.Fields(fs.Name())[1:], true)
	return ExitUsage, false
}

// flagNameRE finds the -name of a flag in the flag package's errors.
var flagNameRE = regexp.MustCompile(`(: | flag )-([a-z])`)

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
func unknownSubcommand(env Env, cmd, sub string) int {
	fmt.Fprintf(env.Stderr, "vipproxy %s: unknown subcommand %q\n", cmd, sub)
	writeHelp(env.Stderr, []string{cmd}, true)
	return ExitUsage
}

// subcommand checks args[0], the subcommand of cmd: ok is false when the
// command should return code at once (its help after --help, or a
// missing or unknown subcommand).
func subcommand(env Env, cmd string, args []string) (code int, ok bool) {
	switch {
	case len(args) == 0:
		fmt.Fprintf(env.Stderr, "vipproxy %s: which subcommand?\n", cmd)
		writeHelp(env.Stderr, []string{cmd}, true)
		return ExitUsage, false
	case isHelp(args[0]):
		printHelp(env, []string{cmd})
		return ExitOK, false
	case lookup([]string{cmd, args[0]}) == nil:
		return unknownSubcommand(env, cmd, args[0]), false
	}
	return ExitOK, true
}

// loadConfig loads the config and reports an error on stderr; ok is false
// when the caller should exit with ExitUsage. Outside vipproxy.service it
// says in one line that the credentials were checked as paths only.
func loadConfig(env Env, path string) (*config.Valid, bool) {
	return loadConfigNote(env, path, true)
}

// loadConfigNote is loadConfig, printing the credential note only when
// note is true (check --quiet prints nothing on success). Which files it
// opens is config.FilesFor's rule.
func loadConfigNote(env Env, path string, note bool) (*config.Valid, bool) {
	files := config.FilesFor(os.Getenv)
	cfg, err := config.Load(path, files)
	if err != nil {
		// One line per problem: config.Validate reports every one.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(env.Stderr, "vipproxy: %s\n", line)
		}
		return nil, false
	}
	if line := cfg.CredentialNote(); note && files == config.OutsideService && line != "" {
		fmt.Fprintf(env.Stderr, "vipproxy: %s\n", line)
	}
	return cfg, true
}

// isHelp reports whether arg asks for help (for commands with a
// subcommand, where the flag package has not run yet).
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}
