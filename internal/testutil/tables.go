package testutil

import "testing"

// EveryNameImplemented fails t unless table has an entry for each of names
// and no other: a list of names that config accepts and the table of
// their implementations in another package must not drift apart. what
// names one entry of the table ("policy", "prober").
func EveryNameImplemented[K comparable, V any](t testing.TB, names []K, table map[K]V, what string) {
	t.Helper()
	for _, name := range names {
		if _, ok := table[name]; !ok {
			t.Errorf("%v has no %s", name, what)
		}
	}
	if len(table) != len(names) {
		t.Errorf("%d entries in the %s table for %d names", len(table), what, len(names))
	}
}
