package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vipproxy/vipproxy/internal/manpage"
	"github.com/vipproxy/vipproxy/service/config"
)

// WriteManPage writes vipproxy(8) from the command table: every command,
// subcommand and flag, as --help shows them.
func WriteManPage(w io.Writer, version string) {
	manpage.Head(w, "vipproxy", 8, version, "System Administration", "control-plane load balancer for the Kubernetes API")
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B vipproxy\n.I COMMAND\n[\\fISUBCOMMAND\\fR] [\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fIflags\\fR]\n.br\n"+
		".B vipproxy help\n[\\fICOMMAND\\fR [\\fISUBCOMMAND\\fR]]\n.br\n.B vipproxy \\-\\-help\n.br\n.B vipproxy \\-\\-version\n")
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n.PP\n%s\n", manpage.Escape(
		"vipproxy is a layer-4 TCP proxy on the Kubernetes API's virtual IP address (VIP) on the control-plane nodes: "+
			"systemd holds the VIP listeners (vipproxy.socket), vipproxy balances connections over the apiservers it "+
			"health-checks, keepalived or BIRD moves or announces the VIP, and systemd-networkd holds the VIP's link."),
		manpage.Escape("Every command but help takes --config FILE (default "+config.DefaultPath+"), "+
			"the file vipproxy.toml(5) describes. A command's flags come after its name (and subcommand); "+
			"each is written --name or -name, and its value after a space or ="))
	fmt.Fprint(w, ".SH COMMANDS\n")
	for _, c := range commandTable() {
		writeManCommand(w, []string{c.name}, c)
		for _, s := range c.subs {
			writeManCommand(w, []string{c.name, s.name}, s)
		}
	}
	fmt.Fprint(w, manTail)
}

// writeManCommand writes one command's subsection: synopsis, what it
// does, its flags and examples.
func writeManCommand(w io.Writer, path []string, spec *cmdSpec) {
	fmt.Fprintf(w, ".SS %q\n%s\n", synopsis(path, spec), manpage.Escape(strings.TrimSpace(sentence(spec.summary)+" "+spec.about)))
	if spec.doc != "" {
		fmt.Fprintf(w, "More: docs/%s.\n", manpage.Escape(spec.doc))
	}
	if flags := flagsOf(path); len(flags) > 0 {
		fmt.Fprint(w, ".RS 4\n")
		for _, f := range flags {
			fmt.Fprintf(w, ".TP\n%s\n%s\n", manFlag(f), manpage.Escape(flagText(f)))
		}
		fmt.Fprint(w, ".RE\n")
	}
	if len(spec.examples) > 0 {
		fmt.Fprint(w, ".PP\nExamples:\n.RS 4\n")
		for _, e := range spec.examples {
			fmt.Fprintf(w, ".TP\n%s\n%s\n", manpage.Code(e.line), manpage.Escape(e.what))
		}
		fmt.Fprint(w, ".RE\n")
	}
}

// manFlag is a flag's tag: --name in bold, its value's word in italics.
func manFlag(f *flag.Flag) string {
	tag := manpage.Code("--" + f.Name)
	if m := metavar(f); m != "" {
		tag += ` \fI` + m + `\fR`
	}
	return tag
}

const manTail = `.SH EXIT STATUS
.TP
.B 0
success: the config is valid, the daemon is ready, every check passed
.TP
.B 1
the command ran and something is wrong: verification failed, the daemon is not ready or refused the file
.TP
.B 2
bad arguments or a bad config file
.SH FILES
.TP
.I /etc/vipproxy/vipproxy.toml
the configuration, vipproxy.toml(5)
.TP
.I /lib/systemd/system/vipproxy.socket\fR, \fIvipproxy.service\fR, \fIvipproxy\-network.service\fR, \fIvipproxy\-announce.service
the units; \fBvipproxy units write\fR adds the socket's listeners in a drop-in
.TP
.I /run/vipproxy/control.sock\fR, \fI/run/vipproxy/probe.sock
the daemon's control and probe sockets
.SH SEE ALSO
.BR vipproxy.toml (5),
.BR keepalived (8),
.BR bird (8),
.BR systemd.socket (5),
.BR systemd\-networkd (8)
`

// The markers around the command list of docs/operations.md.
const (
	CommandListStart = "<!-- commands: go run ./internal/mangen --operations docs/operations.md -->"
	CommandListEnd   = "<!-- end commands -->"
)

// WriteCommandList writes the command list of docs/operations.md: one
// row per command line, with its flags (but --config, which every
// command takes) and its summary.
func WriteCommandList(w io.Writer) {
	fmt.Fprint(w, "| command | what it does |\n|---|---|\n")
	for _, l := range leaves() {
		line := "vipproxy " + strings.Join(l.path, " ")
		if l.spec.args != "" {
			line += " " + l.spec.args
		}
		for _, f := range l.flags {
			if f.Name == "config" {
				continue
			}
			line += " [--" + f.Name
			if m := metavar(f); m != "" {
				line += " " + m
			}
			line += "]"
		}
		text := l.spec.summary
		if c := lookup(l.path[:1]); c.doc != "" && c.doc != "operations.md" {
			text += fmt.Sprintf(" ([%s](%s))", c.doc, c.doc)
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(line, "|", `\|`), strings.ReplaceAll(text, "|", `\|`))
	}
}
