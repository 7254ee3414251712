package mk

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeIn runs make TARGETS in dir with BIN=bin and returns what
// bin/vipproxy version prints and the first line of bin/man/vipproxy.8;
// with the target completion, it checks the completion files too.
func makeIn(t *testing.T, dir string, targets ...string) (version, manHead string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("make", append([]string{"-C", dir, "-s", "--no-print-directory", "BIN=" + bin}, targets...)...)
	cmd.Env = withoutMakeVars(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %v in %s: %v\n%s", targets, dir, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "vipproxy"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("vipproxy version: %v\n%s", err, out)
	}
	page, err := os.ReadFile(filepath.Join(bin, "man", "vipproxy.8"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(targets, "completion") {
		for name, first := range map[string]string{"vipproxy": "# bash completion for vipproxy", "_vipproxy": "#compdef vipproxy"} {
			if b, err := os.ReadFile(filepath.Join(bin, "completion", name)); err != nil || !strings.HasPrefix(string(b), first) {
				t.Errorf("make completion wrote no %s (%v):\n%.200s", name, err, b)
			}
		}
	}
	head, _, _ := strings.Cut(string(page), "\n")
	return string(out), head
}

// TestBuildNamesItsVersion: make build and make man name the version
// git describe gives and the commit; from a copy of the tree without git
// metadata (as a source tarball), the version and commit of the release's
// VERSION file; without that file either, the binary says it does not
// know, never a made-up version.
func TestBuildNamesItsVersion(t *testing.T) {
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	describe, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("no git metadata here: %v", err)
	}
	head, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	version, man := makeIn(t, "..", "build", "man", "completion")
	want := "vipproxy " + strings.TrimSpace(string(describe)) + "\ncommit: " + strings.TrimSpace(string(head)) + "\n"
	if !strings.HasPrefix(version, want) || !strings.Contains(man, `"vipproxy `+strings.TrimSpace(string(describe))+`"`) {
		t.Errorf("in the git tree: vipproxy version says\n%s\nthe man page %s\nwant\n%s", version, man, want)
	}

	tree := copyTree(t)
	if version, _ := makeIn(t, tree, "build", "man"); !strings.HasPrefix(version, "vipproxy version unknown (built without git metadata)\ncommit: unknown\ngo: go") {
		t.Errorf("without git metadata or VERSION file: vipproxy version says\n%s", version)
	}
	if err := os.WriteFile(filepath.Join(tree, "VERSION"), []byte("v1.2.3\n0123456789abcdef0123456789abcdef01234567\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	version, man = makeIn(t, tree, "build", "man")
	if !strings.HasPrefix(version, "vipproxy v1.2.3\ncommit: 0123456789abcdef0123456789abcdef01234567\n") || !strings.Contains(man, `"vipproxy v1.2.3"`) {
		t.Errorf("with a VERSION file: vipproxy version says\n%s\nthe man page %s", version, man)
	}
}

// copyTree copies the files git tracks, as they are in the work tree, to
// a directory without git metadata.
func copyTree(t *testing.T) string {
	t.Helper()
	files, err := exec.Command("git", "-C", "..", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		b, err := os.ReadFile(filepath.Join("..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		info, serr := os.Stat(filepath.Join("..", f))
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
