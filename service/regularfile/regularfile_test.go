package regularfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every kind of file but a regular one is refused, at once: a FIFO
// without a writer would block a plain open(2) for ever.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "ok")
	if err := os.WriteFile(regular, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifo-link")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{regular, link} {
		if data, err := Read(p, 10); err != nil || string(data) != "data" {
			t.Errorf("%s: %q %v", p, data, err)
		}
	}
	for p, want := range map[string]string{
		fifo: "not a regular file (a FIFO)", fifoLink: "not a regular file (a FIFO)",
		dir: "not a regular file (a directory)", "/dev/zero": "not a regular file (a character device)",
		regular + "-missing": "no such file",
	} {
		if _, err := Read(p, 10); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
	if _, err := Read(regular, 3); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Errorf("a file over the limit: %v", err)
	}
}
