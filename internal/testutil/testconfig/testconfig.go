// Package testconfig parses configs for tests (apart from testutil, which
// must not import the product: the config package's own dependencies use
// testutil).
package testconfig

import (
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// Parse parses a config as /etc/vipproxy/vipproxy.toml, or fails the test.
func Parse(t testing.TB, text string) *config.Valid {
	t.Helper()
	cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(text))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return cfg
}
