package balance

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/vipproxy/vipproxy/service/config"
)

// Policy is one balancing algorithm (caddy-l4 calls it a Selector): it
// picks one backend of list that eligible admits, or nil. cursor is
// the pool's shared round-robin position, for policies that spread ties.
// A new algorithm is a type here, its entry in policies, its case in
// Pool.pick (called by concrete type, see there) and its name in
// config.Algorithms; TestEveryAlgorithmHasAPolicy ties the last two.
type Policy interface {
	Pick(list []*Backend, eligible Eligible, cursor *atomic.Uint64) *Backend
}

// policies maps each configured algorithm to its policy.
var policies = map[config.Algorithm]Policy{
	config.RoundRobin:       roundRobin{},
	config.LeastConnections: leastConnections{},
	config.RandomTwoChoices: randomTwoChoices{},
}

// roundRobin advances the shared cursor once per backend it looks at, so
// a skipped backend's turns are spread over the others instead of all
// going to its successor. It scans from one start: stepping the shared
// cursor per look let concurrent picks move it under each other's scan,
// so that with many backends a scan could miss the only eligible one
// (seen: a reload to 2,001 backends, 1,999 of them down, refused clients).
type roundRobin struct{}

func (roundRobin) Pick(list []*Backend, eligible Eligible, cursor *atomic.Uint64) *Backend {
	n := uint64(len(list))
	start := cursor.Add(1) - 1
	for i := uint64(0); i < n; i++ {
		if b := list[(start+i)%n]; eligible.Admits(b) {
			if i > 0 {
				cursor.Add(i)
			}
			return b
		}
	}
	// Nothing here: give the step back, or Pick's empty tiers would move
	// the cursor by a fixed amount per pick and pin it.
	cursor.Add(^uint64(0))
	return nil
}

// leastConnections starts its scan at the round-robin cursor so ties are
// spread instead of always going to the first backend.
type leastConnections struct{}

func (leastConnections) Pick(list []*Backend, eligible Eligible, cursor *atomic.Uint64) *Backend {
	n := uint64(len(list))
	if n == 0 {
		return nil
	}
	// The cursor moves only when a backend is found: Pick looks at the
	// tiers in turn, and a fixed step per empty tier would pin the start.
	start := cursor.Load()
	var best *Backend
	for i := uint64(0); i < n; i++ {
		b := list[(start+i)%n]
		if eligible.Admits(b) && (best == nil || b.Open() < best.Open()) {
			best = b
		}
	}
	if best != nil {
		cursor.Add(1)
	}
	return best
}

// randomTwoChoices samples two eligible backends and keeps the one with
// fewer open connections: near least-connections balance without a scan
// of shared counters on every pick.
type randomTwoChoices struct{}

func (randomTwoChoices) Pick(list []*Backend, eligible Eligible, _ *atomic.Uint64) *Backend {
	n := len(list)
	if n == 0 {
		return nil
	}
	var a, b *Backend
	for _, off := range []int{rand.IntN(n), rand.IntN(n)} {
		for i := 0; i < n; i++ {
			c := list[(off+i)%n]
			if eligible.Admits(c) && c != a {
				if a == nil {
					a = c
				} else {
					b = c
				}
				break
			}
		}
	}
	if b == nil || (a != nil && a.Open() <= b.Open()) {
		return a
	}
	return b
}
