package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vipproxy/vipproxy/service/config"
)

// flagsOf returns the flags the command at path parses, in the order of
// their names: its run is asked for its help with an Env that prints
// nothing and hands over the FlagSet newFlags made. None for a command
// with subcommands, or one that takes no flag.
func flagsOf(path []string) []*flag.Flag {
	top, spec := lookup(path[:1]), lookup(path)
	if top == nil || spec == nil || len(spec.subs) > 0 {
		return nil
	}
	var got *flag.FlagSet
	env := Env{Stdout: io.Discard, Stderr: io.Discard, flagSets: func(fs *flag.FlagSet) { got = fs }}
	top.run(context.Background(), env, append(append([]string{}, path[1:]...), "--help"))
	if got == nil || got.Name() != "vipproxy "+strings.Join(path, " ") {
		return nil
	}
	var flags []*flag.Flag
	got.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	return flags
}

// metavar is the word for a flag's value in help, man page and
// completion ("" : the flag takes none).
func metavar(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	names := map[string]string{
		"config": "FILE", "out": "FILE", "keepalived-conf": "FILE",
		"root": "DIR", "proc": "DIR",
		"admin": "ADDRESS", "control": "SOCKET", "bird-socket": "SOCKET",
		"pid": "PID", "only": "CHECKS", "job": "JOB",
	}
	if n, ok := names[f.Name]; ok {
		return n
	}
	name, _ := flag.UnquoteUsage(f)
	return strings.ToUpper(name) // DURATION; STRING for a flag with no word yet
}

// flagDefault is the flag's default for help and man page ("" : none
// worth saying: empty, zero or false).
func flagDefault(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return ""
	}
	return f.DefValue
}

// flagText is the flag's usage with its default.
func flagText(f *flag.Flag) string {
	if d := flagDefault(f); d != "" {
		return fmt.Sprintf("%s (default %s)", f.Usage, d)
	}
	return f.Usage
}

// synopsis is the command line of the command at path, as usage shows it.
func synopsis(path []string, spec *cmdSpec) string {
	line := "vipproxy " + strings.Join(path, " ")
	switch {
	case spec.args != "":
		line += " " + spec.args
	case len(spec.subs) > 0:
		line += " " + subNames(spec) + " [flags]"
	case len(flagsOf(path)) > 0:
		line += " [flags]"
	}
	return line
}

// subNames are the subcommands of spec as usage shows them: a|b|c.
func subNames(spec *cmdSpec) string {
	var names []string
	for _, s := range spec.subs {
		names = append(names, s.name)
	}
	return strings.Join(names, "|")
}

// writeUsage prints vipproxy's own usage: the commands and how to get help.
func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: vipproxy COMMAND [flags]")
	fmt.Fprintln(w, "       vipproxy help [COMMAND [SUBCOMMAND]] | --help | --version")
	fmt.Fprintln(w, "\nThe control-plane load balancer: a TCP proxy on the Kubernetes API's VIP.\n\ncommands:")
	for _, c := range commandTable() {
		text := c.summary
		if len(c.subs) > 0 {
			text = subNames(c) + ": " + text
		}
		fmt.Fprintf(w, "  %-11s %s\n", c.name, wrap(text, 14))
	}
	fmt.Fprintf(w, "\nEvery command but help takes --config FILE (default %s).\n", config.DefaultPath)
	fmt.Fprintln(w, "vipproxy help COMMAND prints a command's flags and examples; man 8 vipproxy, all of them.")
}

// writeHelp prints the help of the command at path: its usage, what it
// does, its subcommands or flags and its examples; short leaves out what
// it does and the examples (after a usage error).
func writeHelp(w io.Writer, path []string, short bool) {
	spec := lookup(path)
	if spec == nil {
		writeUsage(w)
		return
	}
	fmt.Fprintf(w, "usage: %s\n", synopsis(path, spec))
	if !short {
		fmt.Fprintf(w, "\n%s\n", wrap(sentence(spec.summary)+" "+spec.about, 0))
	}
	if len(spec.subs) > 0 {
		fmt.Fprintln(w, "\nsubcommands:")
		for _, s := range spec.subs {
			fmt.Fprintf(w, "  %-8s %s\n", s.name, wrap(s.summary, 11))
		}
	}
	if flags := flagsOf(path); len(flags) > 0 {
		fmt.Fprintln(w, "\nflags:")
		writeFlags(w, flags)
	}
	if short {
		fmt.Fprintf(w, "\nvipproxy help %s prints its examples.\n", strings.Join(path, " "))
		return
	}
	if examples := examplesOf(spec); len(examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range examples {
			fmt.Fprintf(w, "  %s\n      %s\n", e.line, wrap(e.what, 6))
		}
	}
	if len(spec.subs) > 0 {
		fmt.Fprintf(w, "\nvipproxy help %s SUBCOMMAND prints a subcommand's flags.\n", strings.Join(path, " "))
	}
}

// examplesOf are the examples of spec, or those of its subcommands.
func examplesOf(spec *cmdSpec) []example {
	if len(spec.examples) > 0 {
		return spec.examples
	}
	var all []example
	for _, s := range spec.subs {
		all = append(all, s.examples[:min(1, len(s.examples))]...)
	}
	return all
}

// printHelp prints the help of the command at path on stdout, unless
// flagsOf is asking for the command's flags.
func printHelp(env Env, path []string) {
	if env.flagSets == nil {
		writeHelp(env.Stdout, path, false)
	}
}

// writeFlags prints flags GNU-style, two columns: `--name WORD` and the
// usage with the default.
func writeFlags(w io.Writer, flags []*flag.Flag) {
	const col = 24
	for _, f := range flags {
		left := "  --" + f.Name
		if m := metavar(f); m != "" {
			left += " " + m
		}
		if len(left) < col-1 {
			fmt.Fprintf(w, "%-*s%s\n", col, left, wrap(flagText(f), col))
		} else {
			fmt.Fprintf(w, "%s\n%s%s\n", left, strings.Repeat(" ", col), wrap(flagText(f), col))
		}
	}
}

// sentence makes a summary a sentence: a capital and a period.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:] + "."
}

// wrap breaks text into lines of at most 79 columns, every line after the
// first indented by indent spaces (the first is where the caller put it).
func wrap(text string, indent int) string {
	var b strings.Builder
	col := indent
	for i, word := range strings.Fields(text) {
		if i > 0 && col+1+len(word) > 79 {
			b.WriteString("\n" + strings.Repeat(" ", indent))
			col = indent
		} else if i > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// runHelp prints the help of vipproxy, or of the command (and
// subcommand) its arguments name.
func runHelp(ctx context.Context, env Env, args []string) int {
	if len(args) > 1 && isHelp(args[len(args)-1]) {
		args = args[:len(args)-1] // help network apply --help: the same
	}
	switch {
	case len(args) == 0:
		writeUsage(env.Stdout)
		return ExitOK
	case len(args) == 1 && isHelp(args[0]):
		printHelp(env, []string{"help"})
		return ExitOK
	}
	if lookup(args) == nil || len(args) > 2 || isHelp(args[0]) {
		fmt.Fprintf(env.Stderr, "vipproxy help: no command %q\n", strings.Join(args, " "))
		writeUsage(env.Stderr)
		return ExitUsage
	}
	return Main(ctx, env, append(append([]string{}, args...), "--help"))
}
