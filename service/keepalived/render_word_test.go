package keepalived

import "testing"

// isWord replaced the regexp ^[A-Za-z0-9_.:-]+$ one for one.
func TestIsWord(t *testing.T) {
	for s, want := range map[string]bool{
		"vipproxy": true, "eth0.100": true, "VI_1": true, "a:b-c": true, "0": true,
		"": false, "a b": false, "x$": false, "é": false, "a\n": false, `a"`: false, "a{": false,
	} {
		if got := isWord(s); got != want {
			t.Errorf("isWord(%q) = %v, want %v", s, got, want)
		}
	}
}
