// Package testconfig parses configs for tests (apart from testutil, which
// must not import the product: the config package's own dependencies use
// testutil).
package testconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// Parse parses the lines of a config as /etc/vipproxy/vipproxy.toml, or
// fails the test.
func Parse(t testing.TB, lines ...string) *config.Valid {
	t.Helper()
	cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return cfg
}

// WithBackend parses lines plus one [[backend]] at address (host:port, or
// a host where lines have [[port]] tables), or fails the test.
func WithBackend(t testing.TB, address string, lines ...string) *config.Valid {
	t.Helper()
	return Parse(t, append(slices.Clip(lines), "[[backend]]", fmt.Sprintf("address = %q", address))...)
}
