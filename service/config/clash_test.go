package config

import (
	"net/netip"
	"testing"
)

func TestSameSocket(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:6449", "127.0.0.1:6449", true},
		{"127.0.0.1:6449", "127.0.0.1:6443", false},
		{"127.0.0.1:6443", "10.0.0.10:6443", false},
		{"0.0.0.0:6443", "10.0.0.10:6443", true},
		{"0.0.0.0:6443", "[2001:db8::10]:6443", false},
		{"[::]:6443", "10.0.0.10:6443", true}, // Go binds [::] dual-stack
		{"[::]:6443", "[2001:db8::10]:6443", true},
		{"[::1]:6443", "[2001:db8::10]:6443", false},
	} {
		a, b := netip.MustParseAddrPort(tc.a), netip.MustParseAddrPort(tc.b)
		if got := sameSocket(a, b); got != tc.want || sameSocket(b, a) != tc.want {
			t.Errorf("sameSocket(%s, %s) = %v, want %v both ways", a, b, got, tc.want)
		}
	}
}
