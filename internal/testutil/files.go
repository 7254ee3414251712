package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes body to path under root, making its directories, and
// returns the file's full path.
func WriteFile(t testing.TB, root, path, body string) string {
	t.Helper()
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
