package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/vipproxy/vipproxy/internal/manpage"
	"github.com/vipproxy/vipproxy/service/cli"
	"github.com/vipproxy/vipproxy/service/config"
)

// writeManPage writes vipproxy(8) from the command table: every command,
// subcommand and flag, as --help shows them.
func writeManPage(w io.Writer, version string) {
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
	for _, c := range cli.Commands() {
		writeManCommand(w, c)
	}
	fmt.Fprint(w, manTail)
}

// writeManCommand writes one command's subsection: synopsis, what it
// does, its flags and examples.
func writeManCommand(w io.Writer, c cli.Command) {
	fmt.Fprintf(w, ".SS %q\n%s\n", c.Synopsis, manpage.Escape(c.Sentence()))
	if c.Doc != "" && len(c.Path) == 1 {
		fmt.Fprintf(w, "More: docs/%s.\n", manpage.Escape(c.Doc))
	}
	if len(c.Flags) > 0 {
		fmt.Fprint(w, ".RS 4\n")
		for _, f := range c.Flags {
			tag := manpage.Code("--" + f.Name)
			if f.Metavar != "" {
				tag += ` \fI` + f.Metavar + `\fR`
			}
			fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, manpage.Escape(f.Usage))
		}
		fmt.Fprint(w, ".RE\n")
	}
	if len(c.Examples) > 0 {
		fmt.Fprint(w, ".PP\nExamples:\n.RS 4\n")
		for _, e := range c.Examples {
			fmt.Fprintf(w, ".TP\n%s\n%s\n", manpage.Code(e.Line), manpage.Escape(e.What))
		}
		fmt.Fprint(w, ".RE\n")
	}
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
	commandListStart = "<!-- commands: go run ./internal/mangen --operations docs/operations.md -->"
	commandListEnd   = "<!-- end commands -->"
)

// writeCommandList writes the command list of docs/operations.md: one
// row per command line that runs, with its flags (but --config, which
// every command but help takes) and its summary.
func writeCommandList(w io.Writer) {
	fmt.Fprint(w, "| command | what it does |\n|---|---|\n")
	for _, c := range cli.Commands() {
		if len(c.Subcommands) > 0 {
			continue
		}
		line := "vipproxy " + strings.Join(c.Path, " ")
		if c.Args != "" {
			line += " " + c.Args
		}
		for _, f := range c.Flags {
			if f.Name == "config" {
				continue
			}
			line += " [--" + strings.TrimSpace(f.Name+" "+f.Metavar) + "]"
		}
		text := c.Summary
		if c.Doc != "" && c.Doc != "operations.md" {
			text += fmt.Sprintf(" ([%s](%s))", c.Doc, c.Doc)
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(line, "|", `\|`), strings.ReplaceAll(text, "|", `\|`))
	}
}
