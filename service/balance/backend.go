// Package balance holds the backend pool and picks a backend for each new
// connection: round-robin, least-connections or random-two-choices over the
// best backends available. It owns each backend's availability, one state
// machine (state.go) that the health checks and the proxy feed with events.
package balance

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipproxy/vipproxy/service/metrics"
)

// Backend is one apiserver and the connections open to it.
type Backend struct {
	Name    string
	Address string
	// ip is Address parsed once, when it is an IP address and a port
	// (without an IPv6 zone): the proxy dials that itself (IPAddress).
	ip netip.AddrPort

	// avail packs State, Rotation and the last-known-good mark into one
	// word, so a pick reads a backend's availability in one atomic load.
	// Only the pool writes it, under Pool.mu (see Pool.Observe).
	avail       atomic.Uint32
	transitions atomic.Uint64 // state changes so far
	lastChange  atomic.Int64  // unix nanoseconds of the latest change; 0: none
	open        atomic.Int64
	// checks counts the health check results in a row; only the pool
	// reads or writes it, under Pool.mu.
	checks streak

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

// Stats resolves a new backend's metrics; initial is the state it starts
// in (Starting or Unknown), for the state gauge.
type Stats func(name string, initial State) *metrics.BackendMetrics

func newBackend(name, address string, initial State, stats Stats) *Backend {
	b := &Backend{Name: name, Address: address, Stats: stats(name, initial), conns: make(map[Conn]struct{})}
	b.avail.Store(availability{state: initial}.pack())
	if ip, err := netip.ParseAddrPort(address); err == nil && ip.Addr().Zone() == "" {
		b.ip = ip
	}
	return b
}

// IPAddress is the backend's address when it is an IP address and a port
// (false: a name to resolve, or an address with an IPv6 zone).
func (b *Backend) IPAddress() (netip.AddrPort, bool) { return b.ip, b.ip.IsValid() }

// availability is the unpacked avail word.
type availability struct {
	state    State
	rotation Rotation
	// good marks a backend of the last known good set while the pool is
	// in panic mode.
	good bool
	// known says the backend has been healthy at least once since it
	// joined the pool: only those count for panic mode.
	known bool
}

func (a availability) pack() uint32 {
	w := uint32(a.state) | uint32(a.rotation)<<8
	if a.good {
		w |= 1 << 16
	}
	if a.known {
		w |= 1 << 17
	}
	return w
}

func unpack(w uint32) availability {
	return availability{state: State(w & 0xff), rotation: Rotation(w >> 8 & 0xff), good: w&(1<<16) != 0, known: w&(1<<17) != 0}
}

func (b *Backend) load() availability { return unpack(b.avail.Load()) }

// store sets the availability and counts a change of State; only the
// pool calls it, under Pool.mu.
func (b *Backend) store(a availability, at time.Time) {
	a.known = a.known || a.state.Healthy()
	if b.load().state != a.state {
		b.transitions.Add(1)
		b.lastChange.Store(at.UnixNano())
	}
	b.avail.Store(a.pack())
}

// Open is the number of connections currently proxied to the backend.
func (b *Backend) Open() int64 { return b.open.Load() }

// State is the backend's availability state.
func (b *Backend) State() State { return b.load().state }

// Rotation says whether the backend is in rotation, draining or removed.
func (b *Backend) Rotation() Rotation { return b.load().rotation }

// Healthy reports whether the backend's checks pass (Up or Suspect).
func (b *Backend) Healthy() bool { return b.State().Healthy() }

// Draining reports whether the operator took the backend out of rotation.
func (b *Backend) Draining() bool { return b.Rotation() == Draining }

// TakesConnections reports whether the backend takes new connections now:
// its checks pass and it is in rotation (State.TakesConnections).
func (b *Backend) TakesConnections() bool {
	a := b.load()
	return a.state.TakesConnections(a.rotation)
}

// Transitions is how many times the backend changed state, and when it
// last did (zero time: never). For metrics and /status.
func (b *Backend) Transitions() (count uint64, last time.Time) {
	count = b.transitions.Load()
	if ns := b.lastChange.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	return count, last
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
