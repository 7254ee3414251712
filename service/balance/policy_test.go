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

// TestPickAllocatesNothing: every policy is called by its concrete type in
// Pool.pick (an interface call would move the proxy's tried list to the
// heap, one allocation per connection; a policy without a case there would
// fall back to round-robin).
func TestPickAllocatesNothing(t *testing.T) {
	for _, a := range config.Algorithms {
		p := newPool(t, a)
		for _, b := range p.Backends() {
			p.Observe(b, CheckPassed)
		}
		pick := func() {
			var triedBuf [8]*Backend // on the stack, as in the proxy's dial
			p.Pick(append(triedBuf[:0], p.Backends()[0]))
		}
		if n := testing.AllocsPerRun(100, pick); n != 0 {
			t.Errorf("%s: %v allocations per pick, want 0 (give it a case in Pool.pick)", a, n)
		}
	}
}
