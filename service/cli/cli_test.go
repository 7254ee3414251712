package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestStrayArgumentIsRefused: a word that is not a flag exits 2 before the
// command runs. The flag package stops at it, so the flags after it were
// dropped unseen: `network write ... stray --diff` wrote the files.
func TestStrayArgumentIsRefused(t *testing.T) {
	root := t.TempDir()
	example := "../../examples/vipproxy.toml"
	for _, args := range [][]string{
		{"check", "--config", example, "stray"},
		{"keepalived", "render", "stray", "--config", example},
		{"keepalived", "--config", example, "stray"},
		{"bird", "write", "--config", example, "--out", filepath.Join(root, "etc", "bird.conf"), "stray"},
		{"bird", "--config", example, "stray"},
		{"announce", "--config", example, "stray"},
		{"reload", "--config", example, "stray", "--pid", "1"},
		{"network", "render", "--config", example, "stray"},
		{"network", "write", "--config", example, "--root", root, "stray", "--diff"},
		{"units", "render", "--config", example, "stray"},
		{"units", "write", "--config", example, "--root", root, "stray", "--diff"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, args)
		if code != ExitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), `unexpected argument "stray"`) {
			t.Errorf("vipproxy %s: exit %d (want 2)\nstdout %q\nstderr %q", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	if written, _ := filepath.Glob(filepath.Join(root, "etc", "*")); len(written) > 0 {
		t.Errorf("a refused command wrote %v", written)
	}
}

// TestUnknownSubcommandIsNamed: a word that is no subcommand of network or
// units is named before the usage (units printed the usage alone).
func TestUnknownSubcommandIsNamed(t *testing.T) {
	for _, args := range [][]string{{"units", "--bogus"}, {"units", "rendr"}, {"network", "--bogus"}, {"network", "aply"}, {"keepalived", "rendr"}, {"completion", "fish"}} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, args)
		want := fmt.Sprintf("vipproxy %s: unknown subcommand %q\nusage: vipproxy %s ", args[0], args[1], args[0])
		if code != ExitUsage || out.Len() != 0 || !strings.HasPrefix(errOut.String(), want) {
			t.Errorf("vipproxy %s: exit %d (want 2)\nstdout %q\nstderr %q, want it to begin %q", strings.Join(args, " "), code, out.String(), errOut.String(), want)
		}
	}
}

// TestDiffWithoutOutIsRefused: keepalived and bird --diff compare with
// --out's file; without one they printed the rendering as if --diff were
// not there.
func TestDiffWithoutOutIsRefused(t *testing.T) {
	for _, cmd := range []string{"keepalived", "bird"} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, []string{cmd, "--config", "../../examples/vipproxy.toml", "--diff"})
		if code != ExitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "vipproxy "+cmd+": --diff needs --out FILE") {
			t.Errorf("vipproxy %s --diff: exit %d (want 2)\nstdout %q\nstderr %q", cmd, code, out.String(), errOut.String())
		}
	}
}

// TestEmptyConfigPath: --config "" names the problem (it printed
// "vipproxy: : read: no such file or directory").
func TestEmptyConfigPath(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, []string{"check", "--config", ""})
	if code != ExitUsage || !strings.Contains(errOut.String(), "vipproxy: (empty path): no config file named: give its path (the default is /etc/vipproxy/vipproxy.toml)") {
		t.Errorf("check --config \"\": exit %d, stderr %q", code, errOut.String())
	}
}

// TestVersionFollowsTheConventions: `version` is a command like the others:
// --help prints its usage, a wrong flag or an argument exits 2 (it printed
// the version and exited 0 whatever followed it).
func TestVersionFollowsTheConventions(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"version"}, ExitOK, "vipproxy test\n", ""},
		{[]string{"--version"}, ExitOK, "vipproxy test\n", ""},
		{[]string{"version", "--help"}, ExitOK, "usage: vipproxy version", ""},
		{[]string{"help", "version"}, ExitOK, "usage: vipproxy version", ""},
		{[]string{"version", "--bogus"}, ExitUsage, "", "flag provided but not defined: --bogus"},
		{[]string{"version", "stray"}, ExitUsage, "", `unexpected argument "stray"`},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, tc.args)
		okOut := tc.stdout == "" && out.Len() == 0 || tc.stdout != "" && strings.HasPrefix(out.String(), tc.stdout)
		okErr := tc.stderr == "" && errOut.Len() == 0 || tc.stderr != "" && strings.Contains(errOut.String(), tc.stderr)
		if code != tc.code || !okOut || !okErr {
			t.Errorf("vipproxy %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)",
				strings.Join(tc.args, " "), code, tc.code, out.String(), tc.stdout, errOut.String(), tc.stderr)
		}
	}
}

// TestUsageNamesEverySubcommand: vipproxy --help lists the verbs of network
// and units that their own usage lists (network's left out write).
func TestUsageNamesEverySubcommand(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), Env{Stdout: &out, Stderr: &out}, []string{"--help"}); code != ExitOK {
		t.Fatalf("vipproxy --help: exit %d", code)
	}
	for _, want := range []string{"network     render|write|apply|check|remove: ", "units       render|write: ", "keepalived  render|write: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("vipproxy --help does not list %q:\n%s", want, out.String())
		}
	}
}
