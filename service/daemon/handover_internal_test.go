package daemon

import (
	"testing"
)

// The store survives a restart only: a stop, or a SIGTERM with no job
// (the unit stops after it), drains.
func TestHandOverFor(t *testing.T) {
	for _, c := range []struct {
		job  string
		want bool
	}{
		{"restart", true},
		{"try-restart", true},
		{"stop", false},
		{"", false},
		{"start", false},
	} {
		got, why := handOverFor(c.job)
		if got != c.want || (!got && why == "") {
			t.Errorf("job %q: hand over %v (%q), want %v with a reason when not", c.job, got, why, c.want)
		}
	}
}

// A pair's store name says which pair, side, port, backend and address it
// is, within what systemd takes (fdname_is_valid), and reads back.
func TestPairName(t *testing.T) {
	k := pairKey{n: 12, port: "api.v1", backend: "node:1 é", address: "[2001:db8::1]:6443"}
	name := pairName(k, "b")
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e || c == ':' {
			t.Fatalf("%q holds %q", name, c)
		}
	}
	got, side, err := parsePairName(name)
	if err != nil || got != k || side != "b" {
		t.Errorf("parsePairName(%q) = %+v, %q, %v; want %+v, b", name, got, side, err, k)
	}
	for _, bad := range []string{"vip", "pair.1.x.a.b.c", "pair.1.c.a.b", "pair.x.c.a.b.c", "pair.1.c.a%.b.c", "pair.1.c.a%zz.b.c"} {
		if _, _, err := parsePairName(bad); err == nil {
			t.Errorf("parsePairName(%q) took it", bad)
		}
	}
}
