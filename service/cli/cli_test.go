package cli

import (
	"bytes"
	"context"
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
		{"keepalived", "stray", "--config", example},
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
