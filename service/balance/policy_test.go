package balance

import (
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestEveryAlgorithmHasAPolicy: config.Algorithms (what check accepts) and
// policies (what the pool runs) name the same algorithms.
func TestEveryAlgorithmHasAPolicy(t *testing.T) {
	testutil.EveryNameImplemented(t, config.Algorithms, policies, "policy")
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
