package cli

import (
	"fmt"
	"strings"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// renderCommand is a command that renders one file from the config:
// `render` prints it, `write` writes it (atomically; --diff: dry run) to
// --out, by default where the distribution's package reads it.
type renderCommand struct {
	name    string // the command's name, in its usage and errors
	outFile string // write's default --out
	// refusal is why this config has no such file (its mode does not use
	// it) and the fix; "" when it has one.
	refusal func(*config.Valid) string
	render  func(*config.Valid) []byte
}

func (c renderCommand) run(env Env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		return c.runDeprecated(env, args)
	}
	if code, ok := subcommand(env, c.name, args); !ok {
		return code
	}
	var path, out string
	var diff bool
	fs := newFlags(env, c.name+" "+args[0], &path)
	if args[0] == "write" {
		fs.StringVar(&out, "out", c.outFile, "the file to write, atomically")
		fs.BoolVar(&diff, "diff", false, "print what would change in the file and write nothing")
	}
	cfg, code, ok := parseFlagsAndConfig(env, fs, args[1:])
	if !ok {
		return code
	}
	return c.output(env, cfg, out, diff)
}

// runDeprecated is the form without a subcommand: it prints, or writes
// with --out FILE (--diff: dry run), and says what replaces it.
func (c renderCommand) runDeprecated(env Env, args []string) int {
	var path, out string
	var diff bool
	fs := newFlags(env, c.name, &path)
	fs.StringVar(&out, "out", "", "deprecated: use "+c.name+" write --out FILE")
	fs.BoolVar(&diff, "diff", false, "deprecated: use "+c.name+" write --diff")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	fmt.Fprintf(env.Stderr, "vipproxy %s: deprecated without a subcommand: use `vipproxy %[1]s render`, or `vipproxy %[1]s write [--out FILE] [--diff]`\n", c.name)
	if diff && out == "" {
		// Without a file there is nothing to compare with: it printed the
		// rendering, as if --diff were not there.
		fmt.Fprintf(env.Stderr, "vipproxy %s: --diff needs --out FILE, the file to compare the rendering with\n", c.name)
		return ExitUsage
	}
	cfg, ok := loadConfig(env, path)
	if !ok {
		return ExitUsage
	}
	return c.output(env, cfg, out, diff)
}

// output prints the rendering (out ""), or writes it to out, or shows
// what writing it would change (diff).
func (c renderCommand) output(env Env, cfg *config.Valid, out string, diff bool) int {
	if why := c.refusal(cfg); why != "" {
		fmt.Fprintf(env.Stderr, "vipproxy %s: %s\n", c.name, why)
		return ExitFailure
	}
	return writeRendered(env, c.name, out, diff, c.render(cfg))
}

// writeRendered prints data, or writes it to out atomically, or with diff
// shows what writing it would change; cmd names the command in errors.
func writeRendered(env Env, cmd, out string, diff bool, data []byte) int {
	if out == "" {
		env.Stdout.Write(data)
		return ExitOK
	}
	f := atomicfile.File{Path: out, Data: data, Perm: 0o644}
	if diff {
		printDiffs(env.Stdout, []atomicfile.File{f})
		return ExitOK
	}
	if _, err := atomicfile.WriteSet([]atomicfile.File{f}, nil); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy %s: %v\n", cmd, err)
		return ExitFailure
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", out)
	return ExitOK
}
