package docs

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// processWords are phrases about how vipproxy's sources were worked on
// rather than about vipproxy: numbered work items and the people who did
// them. Reasons stay in the product's terms ("measured on 2026-12-05:
// ..."). A TLS or BGP session is product language and not matched.
var processWords = regexp.MustCompile(`(?i)\bsessions? [0-9]+|\bissues? #?[0-9]+|\bengineers?\b|\bteams?\b|\bteam's\b|\bthe lead\b`)

// TestProductSpeaksOfTheProduct: no tracked file speaks of how it was
// made (this file's pattern aside).
func TestProductSpeaksOfTheProduct(t *testing.T) {
	files := trackedFiles(t)
	if len(files) < 50 {
		t.Fatalf("found only %d files under the repository root", len(files))
	}
	self, err := filepath.Abs("words_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == self {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet in the index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := processWords.FindString(line); m != "" {
				rel, _ := filepath.Rel(filepath.Dir(self), f)
				t.Errorf("%s:%d: %q speaks of how the code was worked on, not of vipproxy: say what it does or what was measured, and when", rel, i+1, m)
			}
		}
	}
}

// trackedFiles are the absolute paths of git's tracked files, or, without
// git (a source tarball), every file under the repository root.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if b, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil {
		for _, f := range strings.Split(string(b), "\x00") {
			if f != "" {
				out = append(out, filepath.Join(root, f))
			}
		}
		return out
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "result") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
