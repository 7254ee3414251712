package balance

import (
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// TestEveryAlgorithmHasAPolicy: config.Algorithms (what check accepts) and
// policies (what the pool runs) name the same algorithms.
func TestEveryAlgorithmHasAPolicy(t *testing.T) {
	for _, a := range config.Algorithms {
		if _, ok := policies[a]; !ok {
			t.Errorf("algorithm %s has no policy", a)
		}
	}
	if len(policies) != len(config.Algorithms) {
		t.Errorf("%d policies for %d algorithms", len(policies), len(config.Algorithms))
	}
}
