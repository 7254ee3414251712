package health

import (
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// TestEveryCheckKindHasAProber: config.CheckKinds (what check accepts) and
// probers (what the checker runs) name the same kinds.
func TestEveryCheckKindHasAProber(t *testing.T) {
	for _, k := range config.CheckKinds {
		if _, ok := probers[k]; !ok {
			t.Errorf("check kind %s has no prober", k)
		}
	}
	if len(probers) != len(config.CheckKinds) {
		t.Errorf("%d probers for %d check kinds", len(probers), len(config.CheckKinds))
	}
}
