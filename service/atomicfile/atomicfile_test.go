package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteSetSkipsUnchangedAndUndoes(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.conf"), filepath.Join(dir, "sub/b.conf")
	if err := os.WriteFile(a, []byte("same\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	changed, undo, err := WriteSetUndo([]File{{a, []byte("same\n"), 0o644}, {b, []byte("new\n"), 0o644}}, nil)
	if err != nil || !slices.Equal(changed, []string{b}) {
		t.Fatalf("changed %v, %v; want only %s", changed, err, b)
	}
	if st, _ := os.Stat(a); st.Mode().Perm() != 0o600 {
		t.Errorf("unchanged file was rewritten (mode %v)", st.Mode().Perm())
	}
	if st, _ := os.Stat(b); st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("undo left the new file: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteSetRestoresOnFailure(t *testing.T) {
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "1"), filepath.Join(dir, "2"), filepath.Join(dir, "3")}
	for _, p := range paths[:2] {
		if err := os.WriteFile(p, []byte("old "+p), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	failThird := func(path string, data []byte, perm fs.FileMode) error {
		if calls++; calls == 3 {
			return errors.New("injected")
		}
		return Write(path, data, perm)
	}
	var files []File
	for _, p := range paths {
		files = append(files, File{p, []byte("new"), 0o644})
	}
	if _, err := WriteSet(files, failThird); err == nil {
		t.Fatal("no error from a failing write")
	}
	for _, p := range paths[:2] {
		got, _ := os.ReadFile(p)
		st, _ := os.Stat(p)
		if string(got) != "old "+p || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: %q mode %v, want the old content and mode", p, got, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(paths[2]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the failed file exists: %v", err)
	}
}

// A rollback puts back exactly what was there: a symbolic link stays a
// link to the same target (it became a regular file with the target's
// content), a dangling one too.
func TestRollbackRestoresSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.conf")
	if err := os.WriteFile(real, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link, dangling := filepath.Join(dir, "link.conf"), filepath.Join(dir, "dangling.conf")
	if err := os.Symlink("real.conf", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere.conf", dangling); err != nil {
		t.Fatal(err)
	}
	fail := func(path string, data []byte, perm fs.FileMode) error {
		if filepath.Base(path) == "last.conf" {
			return errors.New("disk full")
		}
		return Write(path, data, perm)
	}
	_, err := WriteSet([]File{
		{link, []byte("new\n"), 0o644},
		{dangling, []byte("new\n"), 0o644},
		{filepath.Join(dir, "last.conf"), []byte("x\n"), 0o644},
	}, fail)
	if err == nil {
		t.Fatal("WriteSet succeeded with a failing write")
	}
	for path, target := range map[string]string{link: "real.conf", dangling: "nowhere.conf"} {
		if got, err := os.Readlink(path); err != nil || got != target {
			t.Errorf("%s after rollback: link to %q (%v), want a link to %q", filepath.Base(path), got, err, target)
		}
	}
	if b, _ := os.ReadFile(real); string(b) != "old\n" {
		t.Errorf("the link's target holds %q, want \"old\\n\"", b)
	}
}
