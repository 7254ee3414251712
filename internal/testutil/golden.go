package testutil

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

// NodeConfig is the smallest config of a controller node: its VIPs, one
// backend and its uplinks, then extra (more tables) as it is.
func NodeConfig(vips []string, backend string, uplinks []string, extra string) string {
	return fmt.Sprintf("[vip]\naddresses = %s\n[[backend]]\naddress = %q\n[network]\nuplinks = %s\n%s", quoted(vips), backend, quoted(uplinks), extra)
}

// BGPNodeConfig is NodeConfig for a node in vip.mode = "bgp"; extra holds
// its [bgp] table.
func BGPNodeConfig(vips []string, backend string, uplinks []string, extra string) string {
	return strings.Replace(NodeConfig(vips, backend, uplinks, extra), "[vip]\n", "[vip]\nmode = \"bgp\"\n", 1)
}

// quoted writes strings as a TOML array.
func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
