// Package balance holds the backend pool and picks a backend for each new
// connection: round-robin, least-connections or random-two-choices over the
// backends that are not known to be down.
package balance

import (
	"sync"
	"sync/atomic"

	"github.com/vipproxy/vipproxy/service/metrics"
)

// Health states as the pool sees them; the health package decides them.
const (
	stateUnknown int32 = iota // not checked yet: usable, optimistically
	stateUp
	stateDown
)

// Backend is one apiserver and the connections open to it.
type Backend struct {
	Name    string
	Address string

	state    atomic.Int32
	suspect  atomic.Bool // a dial failed since the last good health check
	lastGood atomic.Bool // the most recent health check passed
	removed  atomic.Bool // dropped by a reload; never picked again
	draining atomic.Bool // taken out of rotation by the operator
	open     atomic.Int64

	// Stats are this backend's metrics, resolved once so that the proxy's
	// hot path does no label lookups.
	Stats *metrics.BackendMetrics

	mu    sync.Mutex
	conns map[Conn]struct{}
}

// Conn is a proxied connection as the pool tracks it.
type Conn interface {
	// Close ends the connection.
	Close() error
	// Evacuate takes the connection off this backend: one the backend has
	// not answered yet moves to another backend; the others are closed.
	Evacuate()
}

func newBackend(name, address string, stats func(name string) *metrics.BackendMetrics) *Backend {
	return &Backend{Name: name, Address: address, Stats: stats(name), conns: make(map[Conn]struct{})}
}

// Open is the number of connections currently proxied to the backend.
func (b *Backend) Open() int64 { return b.open.Load() }

// Up reports whether the last health verdict was up.
func (b *Backend) Up() bool { return b.state.Load() == stateUp }

// Down reports whether the backend is known to be down.
func (b *Backend) Down() bool { return b.state.Load() == stateDown }

// Suspect reports whether a dial failed since the last good check.
func (b *Backend) Suspect() bool { return b.suspect.Load() }

// MarkUp records a successful health verdict and clears suspicion.
func (b *Backend) MarkUp() {
	b.state.Store(stateUp)
	b.suspect.Store(false)
}

// MarkDown records a failed health verdict.
func (b *Backend) MarkDown() { b.state.Store(stateDown) }

// CheckPassed clears suspicion after a successful probe, even while the
// state machine still waits for `rise` successes.
func (b *Backend) CheckPassed() {
	b.suspect.Store(false)
	b.lastGood.Store(true)
}

// CheckFailed records a failed probe.
func (b *Backend) CheckFailed() { b.lastGood.Store(false) }

// recovering says a down backend passed its latest check: the picker's
// last resort when every backend is down.
func (b *Backend) recovering() bool {
	return !b.removed.Load() && !b.draining.Load() && b.lastGood.Load()
}

// MarkSuspect is called when a dial fails: the picker avoids the backend
// until a health check succeeds again.
func (b *Backend) MarkSuspect() { b.suspect.Store(true) }

// SetDraining takes the backend out of rotation (true) or puts it back.
// Its open connections are left alone.
func (b *Backend) SetDraining(on bool) { b.draining.Store(on) }

// Draining reports whether the operator took the backend out of rotation.
func (b *Backend) Draining() bool { return b.draining.Load() }

// pickable says whether the backend may be chosen at all.
func (b *Backend) pickable() bool {
	return !b.removed.Load() && !b.draining.Load() && b.state.Load() != stateDown
}

// usable says whether the picker may choose the backend in a first pass.
func (b *Backend) usable() bool {
	return b.pickable() && !b.suspect.Load()
}

// Track registers an open connection so that CloseAll can end it; the
// returned func unregisters it and must be called exactly once.
func (b *Backend) Track(c Conn) (untrack func()) {
	b.open.Add(1)
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		b.open.Add(-1)
	}
}

// CloseAll closes every tracked connection and returns how many it closed.
// Used when draining ends and when a removed backend's grace time is over.
func (b *Backend) CloseAll() int {
	victims := b.Conns()
	for _, c := range victims {
		c.Close()
	}
	return len(victims)
}

// EvacuateAll takes every tracked connection off the backend when it goes
// down: long watches must reconnect to a healthy apiserver at once, and a
// connection still waiting for the backend's first byte is replayed on
// another one. It returns how many connections it touched.
func (b *Backend) EvacuateAll() int {
	victims := b.Conns()
	for _, c := range victims {
		c.Evacuate()
	}
	return len(victims)
}

// Conns returns the connections tracked now.
func (b *Backend) Conns() []Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Conn, 0, len(b.conns))
	for c := range b.conns {
		out = append(out, c)
	}
	return out
}
