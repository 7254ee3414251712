package cli

import "strings"

// Command describes one entry of the command table as --help shows it:
// a command, or one of its subcommands. Tools that write vipproxy's
// documentation from the table (internal/mangen: the man page, the
// command list of docs/operations.md) read it.
type Command struct {
	Path        []string // ["network", "apply"]
	Synopsis    string   // "vipproxy network apply [flags]"
	Summary     string   // one line: lower case, no final period
	About       string   // more, or ""
	Doc         string   // the page of docs/ that says more, or ""
	Args        string   // its arguments when they are not flags, or ""
	Subcommands []string // its subcommands, when it has some
	Flags       []Flag
	Examples    []Example
}

// Flag is one flag of a command.
type Flag struct {
	Name    string // without dashes
	Metavar string // the word for its value ("" : it takes none)
	Usage   string // with its default
}

// Example is a command line and what it does.
type Example struct{ Line, What string }

// Commands describes every command and then its subcommands, in the
// order of vipproxy --help.
func Commands() []Command {
	var out []Command
	for _, c := range commandTable() {
		out = append(out, describe([]string{c.name}, c))
		for _, s := range c.subs {
			out = append(out, describe([]string{c.name, s.name}, s))
		}
	}
	return out
}

func describe(path []string, spec *cmdSpec) Command {
	d := Command{Path: path, Synopsis: synopsis(path, spec), Summary: spec.summary, About: spec.about, Args: spec.args,
		Doc: lookup(path[:1]).doc}
	for _, s := range spec.subs {
		d.Subcommands = append(d.Subcommands, s.name)
	}
	for _, f := range flagsOf(path) {
		d.Flags = append(d.Flags, Flag{Name: f.Name, Metavar: metavar(f), Usage: flagText(f)})
	}
	for _, e := range spec.examples {
		d.Examples = append(d.Examples, Example{Line: e.line, What: e.what})
	}
	return d
}

// Sentence makes a summary a sentence, as --help prints it: a capital and
// a period.
func (c Command) Sentence() string {
	return strings.TrimSpace(sentence(c.Summary) + " " + c.About)
}
