package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// helpOf runs `vipproxy ARGS` in-process and returns its stdout; it fails
// the test unless it exits 0 with nothing on stderr.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, args); code != ExitOK || errOut.Len() > 0 {
		t.Fatalf("vipproxy %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// TestEveryHelpSaysWhatAndHow: every command's help has a usage line, a
// sentence saying what it does and an example, each example's command
// line is one vipproxy takes; every flag has a usage and a word for its
// value.
func TestEveryHelpSaysWhatAndHow(t *testing.T) {
	for _, c := range commandTable() {
		paths := [][]string{{c.name}}
		for _, s := range c.subs {
			paths = append(paths, []string{c.name, s.name})
		}
		for _, p := range paths {
			out := helpOf(t, append(p, "--help")...)
			spec := lookup(p)
			if len(spec.subs) == 0 && len(spec.examples) == 0 || !strings.Contains(out, "\nexamples:\n  vipproxy ") && !strings.Contains(out, "\nexamples:\n  source ") {
				t.Errorf("vipproxy %s has no example:\n%s", strings.Join(p, " "), out)
			}
			for _, e := range spec.examples {
				checkExample(t, e.line)
			}
			if !strings.HasPrefix(out, "usage: vipproxy "+strings.Join(p, " ")) || spec.summary == "" ||
				!strings.Contains(strings.Join(strings.Fields(out), " "), sentence(spec.summary)) {
				t.Errorf("vipproxy %s --help says no usage or what it does:\n%s", strings.Join(p, " "), out)
			}
			for _, f := range flagsOf(p) {
				if f.Usage == "" || metavar(f) == "STRING" || !strings.Contains(out, "--"+f.Name) {
					t.Errorf("vipproxy %s --%s: no usage, no word for its value, or not in --help:\n%s", strings.Join(p, " "), f.Name, out)
				}
			}
		}
	}
}

// checkExample runs the vipproxy command line of an example (up to a
// shell operator) with --help after it: its words must be the command's
// and its flags flags the command takes.
func checkExample(t *testing.T, line string) {
	t.Helper()
	i := strings.Index(line, "vipproxy ")
	if i < 0 {
		return // systemctl reload vipproxy.service
	}
	cmd := line[i+len("vipproxy "):]
	for _, op := range []string{" && ", " | ", " > ", ")"} {
		cmd, _, _ = strings.Cut(cmd, op)
	}
	var args []string
	for _, w := range strings.Fields(cmd) {
		args = append(args, strings.Trim(w, `'"`))
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, append(args, "--help")); code != ExitOK || errOut.Len() > 0 {
		t.Errorf("example %q: vipproxy %s --help: exit %d\n%s", line, strings.Join(args, " "), code, errOut.String())
	}
}
