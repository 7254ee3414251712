package bench

import (
	"strings"
	"testing"
)

// A whole count prints without decimals, a measured figure with them even
// when it is whole: a storm's proxy CPU of exactly 1.00 s printed "1", as
// if it had counted something (the table of 2026-12-05).
func TestTableCellsTellCountsFromMeasures(t *testing.T) {
	opt := options{StormClients: 100}
	r := newResults()
	for _, c := range []string{"vipproxy", "haproxy"} {
		r.add("st-at-once-cpu", c, 1)
		r.add("st-at-once-failed", c, 3)
	}
	table := r.render([]string{"vipproxy", "haproxy"}, opt)
	for _, want := range []string{
		"| storm: all watches connect at once: proxy CPU s in the first ",
		" | 1.00 | 1.00 | 1.00 |",
		"| storm: all watches connect at once: failed connection attempts | 3 | 3 | 1.00 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
