// Package testconfig parses configs for tests (apart from testutil, which
// must not import the product: the config package's own dependencies use
// testutil).
package testconfig

import (
	"crypto/sha256"
	"fmt"
	"iter"
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

// Accepted is a hostile value (Fields) that config.Parse accepts, with its
// config and the file a renderer made of it.
type Accepted struct {
	Field  Field
	Value  string
	Config *config.Valid
	Data   []byte
}

// Distinct yields each hostile value of Fields whose config config.Parse
// accepts and take takes (nil: every one), once per distinct file: render
// makes the file, and a value whose file came before is passed over.
func Distinct(take func(*config.Valid) bool, render func(*config.Valid) []byte) iter.Seq[Accepted] {
	return func(yield func(Accepted) bool) {
		seen := map[[32]byte]bool{}
		for _, f := range Fields {
			for _, v := range f.Values() {
				cfg, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(f.Config(v)))
				if err != nil || take != nil && !take(cfg) {
					continue
				}
				data := render(cfg)
				key := sha256.Sum256(data)
				if seen[key] {
					continue
				}
				seen[key] = true
				if !yield(Accepted{Field: f, Value: v, Config: cfg, Data: data}) {
					return
				}
			}
		}
	}
}
