package cli

import (
	"fmt"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// renderCommand is a command that prints one file rendered from the
// config, or writes it with --out (atomically; --diff: dry run).
type renderCommand struct {
	name    string // the command's name, in its usage and errors
	outHelp string // --out's usage
	// refusal is why this config has no such file (its mode does not use
	// it) and the fix; "" when it has one.
	refusal func(*config.Valid) string
	render  func(*config.Valid) []byte
}

func (c renderCommand) run(env Env, args []string) int {
	var path, out string
	var diff bool
	fs := newFlags(env, c.name, &path)
	fs.StringVar(&out, "out", "", c.outHelp)
	fs.BoolVar(&diff, "diff", false, "with --out: show what would change in the file and write nothing")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
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
