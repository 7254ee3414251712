package balance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/metrics"
)

// Pool is the current set of backends and the algorithm that picks among
// them. Pick is lock-free; Update swaps the set for a reload.
type Pool struct {
	algorithm atomic.Pointer[string] // changes on reload while picks run
	backends  atomic.Pointer[[]*Backend]
	next      atomic.Uint64 // round-robin cursor
	panicking atomic.Bool   // panic mode: see transition.go
	stats     func(name string) *metrics.BackendMetrics

	mu         sync.Mutex // serialises Update and every change of availability
	panicSince time.Time
	observer   func(Transition)
}

// NewPool builds a pool from the configured backends. stats resolves each
// backend's metrics; nil gives series on a registry of their own (tests, tools).
func NewPool(algorithm string, backends []config.Backend, stats func(name string) *metrics.BackendMetrics) (*Pool, error) {
	if stats == nil {
		stats = metrics.New().Backend
	}
	p := &Pool{stats: stats}
	if err := p.SetAlgorithm(algorithm); err != nil {
		return nil, err
	}
	list := make([]*Backend, 0, len(backends))
	for _, b := range backends {
		list = append(list, newBackend(b.Name, b.Address, stats))
	}
	p.backends.Store(&list)
	return p, nil
}

// SetAlgorithm changes the balancing algorithm (on reload).
func (p *Pool) SetAlgorithm(algorithm string) error {
	switch algorithm {
	case config.RoundRobin, config.LeastConnections, config.RandomTwoChoices:
	default:
		return fmt.Errorf("unknown balancing algorithm %q", algorithm)
	}
	p.algorithm.Store(&algorithm)
	return nil
}

// Backends returns the current backends; the slice must not be modified.
func (p *Pool) Backends() []*Backend { return *p.backends.Load() }

// Lookup returns the backend with the given name, or nil.
func (p *Pool) Lookup(name string) *Backend {
	for _, b := range p.Backends() {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Update replaces the backend set. Backends whose name and address are
// unchanged keep their state and connections; the others are returned as
// added and removed so the caller can start checks and drain.
func (p *Pool) Update(backends []config.Backend) (added, removed []*Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.Backends()
	next := make([]*Backend, 0, len(backends))
	for _, cb := range backends {
		i := slices.IndexFunc(old, func(b *Backend) bool { return b.Name == cb.Name && b.Address == cb.Address })
		if i >= 0 {
			next = append(next, old[i])
			continue
		}
		b := newBackend(cb.Name, cb.Address, p.stats)
		next = append(next, b)
		added = append(added, b)
	}
	now := time.Now()
	for _, b := range old {
		if !slices.Contains(next, b) {
			a := b.load()
			a.rotation = nextRotation(a.rotation, false, true)
			b.store(a, now)
			removed = append(removed, b)
		}
	}
	p.backends.Store(&next)
	p.reassessLocked(nil, Unknown, now)
	return added, removed
}

// Pick chooses a backend for a new connection, skipping those already
// tried for it and those out of rotation. It takes the first tier that has
// a backend: Up, then Suspect, then Unknown (never checked: only while no
// backend is known to be good), then Recovering (every backend down: one
// whose latest check passed is used before `rise` of them). In panic mode
// the last known good set comes before Unknown, and Recovering before it.
// Nil means none is left.
func (p *Pool) Pick(tried []*Backend) *Backend {
	list := p.Backends()
	tiers := normalTiers
	if p.panicking.Load() {
		tiers = panicTiers
	}
	for _, ok := range tiers {
		if b := p.pick(list, tried, ok); b != nil {
			return b
		}
	}
	return nil
}

// A tier says whether a backend's availability puts it in the tier.
type tier func(availability) bool

func inState(s State) tier {
	return func(a availability) bool { return a.rotation == InRotation && a.state == s }
}

func lastKnownGood(a availability) bool { return a.rotation == InRotation && a.good }

var (
	normalTiers = []tier{inState(Up), inState(Suspect), inState(Unknown), inState(Recovering)}
	panicTiers  = []tier{inState(Up), inState(Suspect), inState(Recovering), lastKnownGood, inState(Unknown)}
)

func (p *Pool) pick(list, tried []*Backend, ok tier) *Backend {
	eligible := func(b *Backend) bool { return ok(b.load()) && !slices.Contains(tried, b) }
	switch *p.algorithm.Load() {
	case config.LeastConnections:
		return p.leastConnections(list, eligible)
	case config.RandomTwoChoices:
		return randomTwoChoices(list, eligible)
	default:
		return p.roundRobin(list, eligible)
	}
}

// roundRobin advances the shared cursor once per backend it looks at, so
// a skipped backend's turns are spread over the others instead of all
// going to its successor.
func (p *Pool) roundRobin(list []*Backend, eligible func(*Backend) bool) *Backend {
	n := uint64(len(list))
	for i := uint64(0); i < n; i++ {
		if b := list[(p.next.Add(1)-1)%n]; eligible(b) {
			return b
		}
	}
	return nil
}

// leastConnections starts its scan at the round-robin cursor so ties are
// spread instead of always going to the first backend.
func (p *Pool) leastConnections(list []*Backend, eligible func(*Backend) bool) *Backend {
	n := uint64(len(list))
	if n == 0 {
		return nil
	}
	// The cursor moves only when a backend is found: Pick looks at the
	// tiers in turn, and a fixed step per empty tier would pin the start.
	start := p.next.Load()
	var best *Backend
	for i := uint64(0); i < n; i++ {
		b := list[(start+i)%n]
		if eligible(b) && (best == nil || b.Open() < best.Open()) {
			best = b
		}
	}
	if best != nil {
		p.next.Add(1)
	}
	return best
}

// randomTwoChoices samples two eligible backends and keeps the one with
// fewer open connections: near least-connections balance without a scan
// of shared counters on every pick.
func randomTwoChoices(list []*Backend, eligible func(*Backend) bool) *Backend {
	n := len(list)
	if n == 0 {
		return nil
	}
	var a, b *Backend
	for _, off := range []int{rand.IntN(n), rand.IntN(n)} {
		for i := 0; i < n; i++ {
			c := list[(off+i)%n]
			if eligible(c) && c != a {
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
