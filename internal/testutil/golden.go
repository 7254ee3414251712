package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// update is -update: rewrite the golden files instead of comparing.
var update = flag.Bool("update", false, "rewrite the golden files")

// Golden compares got with the golden file at path, or writes it there
// when the test runs with -update.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// ParseConfig parses a config as /etc/vipproxy/vipproxy.toml, or fails
// the test.
func ParseConfig(t testing.TB, text string) *config.Valid {
	t.Helper()
	cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(text))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return cfg
}
