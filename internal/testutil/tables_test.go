package testutil

import (
	"fmt"
	"slices"
	"testing"
)

// errorRecorder is a testing.TB that keeps the errors reported to it.
type errorRecorder struct {
	testing.TB
	errors []string
}

func (r *errorRecorder) Helper() {}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestEveryNameImplemented: a missing and an extra implementation are
// both reported; a matching table is not.
func TestEveryNameImplemented(t *testing.T) {
	names := []string{"tcp", "tls"}
	for _, c := range []struct {
		table map[string]int
		want  []string
	}{
		{map[string]int{"tcp": 1, "tls": 2}, nil},
		{map[string]int{"tcp": 1}, []string{"tls has no prober", "1 entries in the prober table for 2 names"}},
		{map[string]int{"tcp": 1, "tls": 2, "udp": 3}, []string{"3 entries in the prober table for 2 names"}},
	} {
		r := &errorRecorder{TB: t}
		EveryNameImplemented(r, names, c.table, "prober")
		if !slices.Equal(r.errors, c.want) {
			t.Errorf("table %v: errors %q, want %q", c.table, r.errors, c.want)
		}
	}
}
