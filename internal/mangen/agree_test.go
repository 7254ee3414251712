package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/cli"
)

// helpOf runs `vipproxy ARGS` in-process and returns its stdout; it fails
// the test unless it exits 0 with nothing on stderr.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), cli.Env{Stdout: &out, Stderr: &errOut, Version: "test"}, args); code != cli.ExitOK || errOut.Len() > 0 {
		t.Fatalf("vipproxy %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// commandLines are what a page says of vipproxy's commands: each command
// line that runs ("network apply") and its flags ("--diff"), sorted.
type commandLines map[string][]string

var (
	helpCommandRE = regexp.MustCompile(`(?m)^  ([a-z]+) +(?:([a-z|]+): )?`)
	helpFlagRE    = regexp.MustCompile(`(?m)^  --([a-z-]+)`)
)

// fromHelp reads the command lines from `vipproxy --help` and then from
// `vipproxy help COMMAND [SUBCOMMAND]` of each, as a person would.
func fromHelp(t *testing.T) commandLines {
	usage := helpOf(t, "--help")
	lines := commandLines{}
	for _, m := range helpCommandRE.FindAllStringSubmatch(usage[strings.Index(usage, "commands:"):], -1) {
		subs := []string{""}
		if m[2] != "" {
			subs = strings.Split(m[2], "|")
		}
		for _, sub := range subs {
			path := strings.TrimSpace(m[1] + " " + sub)
			var flags []string
			for _, f := range helpFlagRE.FindAllStringSubmatch(helpOf(t, append([]string{"help"}, strings.Fields(path)...)...), -1) {
				flags = append(flags, "--"+f[1])
			}
			lines[path] = sorted(flags)
		}
	}
	return lines
}

var (
	manCommandRE = regexp.MustCompile(`(?m)^\.SS "vipproxy ([a-z ]+?)(?: \[flags\]| \[COMMAND.*)?"$`)
	manFlagRE    = regexp.MustCompile(`(?m)^\.TP\n\\fB\\-\\-([a-z\\-]+)\\fR`)
)

// fromMan reads the command lines from the man page: one subsection per
// command line, its flags tagged paragraphs. A command with subcommands
// (its synopsis names them) runs only as those.
func fromMan(t *testing.T, page string) commandLines {
	lines := commandLines{}
	sections := manCommandRE.FindAllStringSubmatchIndex(page, -1)
	for i, s := range sections {
		path := page[s[2]:s[3]]
		end := len(page)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		if strings.Contains(page[s[0]:s[1]], "|") {
			continue
		}
		var flags []string
		for _, f := range manFlagRE.FindAllStringSubmatch(page[s[1]:end], -1) {
			flags = append(flags, "--"+strings.ReplaceAll(f[1], `\-`, "-"))
		}
		lines[path] = sorted(flags)
	}
	if len(lines) == 0 {
		t.Fatalf("the man page has no command:\n%s", page)
	}
	return lines
}

var flagNameRE = regexp.MustCompile(`--[a-z-]+`)

var operationsRowRE = regexp.MustCompile("(?m)^\\| `vipproxy ([a-z ]+?)((?: \\[[A-Z][A-Z \\[\\]]*)?)((?: \\[--[a-z-]+(?: [A-Z]+)?\\])*)` \\|")

// fromOperations reads the command lines from docs/operations.md's list:
// there each lists its flags but --config, which every command but help
// takes (the text under the list says so).
func fromOperations(t *testing.T, doc string) commandLines {
	lines := commandLines{}
	for _, m := range operationsRowRE.FindAllStringSubmatch(doc, -1) {
		flags := flagNameRE.FindAllString(m[3], -1)
		if m[1] != "help" {
			flags = append(flags, "--config")
		}
		lines[m[1]] = sorted(flags)
	}
	if len(lines) == 0 {
		t.Fatal("docs/operations.md lists no command")
	}
	return lines
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// TestHelpManAndOperationsAgree: `vipproxy --help` and each command's
// help, the man page `make man` writes and the command list of
// docs/operations.md name the same command lines with the same flags; and
// docs/operations.md's list is the one the command table gives, summaries
// included.
func TestHelpManAndOperationsAgree(t *testing.T) {
	help := fromHelp(t)
	if len(help) < 20 || help["network apply"] == nil || !slices.Contains(help["keepalived write"], "--out") {
		t.Fatalf("--help names too little: %v", help)
	}
	dir := t.TempDir()
	makeMan(t, dir, "test")
	page, err := os.ReadFile(filepath.Join(dir, "vipproxy.8"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]commandLines{"the man page": fromMan(t, string(page)), "docs/operations.md": fromOperations(t, string(doc))} {
		for path, flags := range help {
			if _, ok := got[path]; !ok || !slices.Equal(got[path], flags) {
				t.Errorf("vipproxy %s: --help has flags %v, %s %v", path, flags, name, got[path])
			}
		}
		for path := range got {
			if _, ok := help[path]; !ok {
				t.Errorf("%s names vipproxy %s, which --help does not", name, path)
			}
		}
	}
	var list bytes.Buffer
	writeCommandList(&list)
	if !strings.Contains(string(doc), commandListStart+"\n"+list.String()+commandListEnd) {
		t.Errorf("docs/operations.md's command list is not the command table's: run go run ./internal/mangen --operations docs/operations.md")
	}
}

// TestManPagesRenderWithoutWarnings: man(1) formats both pages `make man`
// writes without a warning, at the width of a terminal and of a narrow one.
func TestManPagesRenderWithoutWarnings(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("no man (make deps installs man-db)")
	}
	dir := t.TempDir()
	makeMan(t, dir, "v9.9.9-test")
	for _, page := range []string{"vipproxy.8", "vipproxy.toml.5"} {
		for _, width := range []string{"80", "70"} {
			var out, errOut bytes.Buffer
			man := exec.Command("man", "--warnings", "-l", filepath.Join(dir, page))
			man.Env = append(os.Environ(), "MANWIDTH="+width, "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat")
			man.Stdout, man.Stderr = &out, &errOut
			if err := man.Run(); err != nil || errOut.Len() > 0 {
				t.Errorf("man --warnings -l %s (MANWIDTH=%s): %v\n%s", page, width, err, errOut.String())
			}
			if !strings.Contains(out.String(), "v9.9.9-test") || !strings.Contains(out.String(), "NAME") {
				t.Errorf("man -l %s printed no page:\n%s", page, out.String())
			}
		}
	}
}

// makeMan runs what `make man` runs, from the top of the tree, writing
// the pages to dir.
func makeMan(t *testing.T, dir, version string) {
	t.Helper()
	mangen := exec.Command("go", "run", "./internal/mangen", "--out", dir, "--version", version)
	mangen.Dir = "../.."
	if out, err := mangen.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/mangen (make man): %v\n%s", err, out)
	}
}
