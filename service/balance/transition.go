package balance

import (
	"slices"
	"time"
)

// Transition is one event applied to a backend, as the observer sees it.
type Transition struct {
	Backend *Backend
	// Event is the event as the machine saw it: a check result reported
	// as CheckPassed or CheckFailed becomes CheckRise or CheckFall when it
	// completes the threshold. Streak is how many check results in a row
	// agree with it (0 for an event that is no check).
	Event    Event
	Streak   int
	From, To State
	At       time.Time
	// Panic says whether the pool is in panic mode after the event;
	// PanicChanged that this event started or ended it.
	Panic, PanicChanged bool
}

// Changed reports whether the event moved the backend to another state.
func (t Transition) Changed() bool { return t.From != t.To }

// SetObserver sets a func told of every event that changed a backend's
// state or the panic mode, in order. It runs under the pool's lock: it
// must be quick and must not call the pool's methods that change state.
func (p *Pool) SetObserver(f func(Transition)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observer = f
}

// Observe applies e to b and returns what it did. A check result is
// counted first (see Thresholds): report CheckPassed or CheckFailed, the
// pool decides whether it completes a rise or a fall. A backend no longer
// in the pool (removed by a reload) still changes state, for its draining
// connections, but no longer counts for panic mode. What the transition
// brings to open connections follows (Evacuation).
func (p *Pool) Observe(b *Backend, e Event) Transition {
	p.mu.Lock()
	tr := p.observeLocked(b, e)
	resume := p.followLocked(tr)
	p.mu.Unlock()
	p.evacuateAll(resume)
	return tr
}

func (p *Pool) observeLocked(b *Backend, e Event) Transition {
	now := time.Now()
	e = b.checks.count(e, p.thresholds)
	a := b.load()
	tr := Transition{Backend: b, Event: e, From: a.state, To: next(a.state, e), At: now}
	if isCheck, _ := e.check(); isCheck {
		tr.Streak = b.checks.n
	}
	a.state = tr.To
	b.store(a, now)
	tr.PanicChanged = p.reassessLocked(b, tr.From, now)
	tr.Panic = p.panicking.Load()
	if p.observer != nil && (tr.Changed() || tr.PanicChanged) {
		p.observer(tr)
	}
	return tr
}

// DialFailed records that a connection to b failed (Event DialFailed) and
// reports whether that made it suspect just now, for a log line once.
func (p *Pool) DialFailed(b *Backend) (newlySuspect bool) {
	tr := p.Observe(b, DialFailed)
	return tr.Changed() && tr.To == Suspect
}

// SetDraining takes b out of rotation (true) or puts it back. Its open
// connections are left alone; its state keeps following its checks. A
// healthy backend put back ends the wait of the down backends whose
// evacuation waited for one that takes new connections.
func (p *Pool) SetDraining(b *Backend, on bool) {
	p.mu.Lock()
	now := time.Now()
	a := b.load()
	a.rotation = nextRotation(a.rotation, on, false)
	b.store(a, now)
	if p.reassessLocked(nil, Unknown, now) && p.observer != nil {
		p.observer(Transition{Backend: b, From: a.state, To: a.state, At: now, PanicChanged: true, Panic: p.panicking.Load()})
	}
	var resume []*Backend
	if b.TakesConnections() && slices.Contains(p.Backends(), b) {
		resume, p.awaitingUp = p.awaitingUp, nil
	}
	p.mu.Unlock()
	p.evacuateAll(resume)
}

// Panic reports whether the pool is in panic mode and since when.
func (p *Pool) Panic() (on bool, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.panicking.Load(), p.panicSince
}

// reassessLocked enters or leaves panic mode (Envoy's term) and reports
// whether it did. The pool panics when a check takes a healthy backend
// down and leaves fewer than half of the known good backends in rotation
// (those healthy at least once since they joined) healthy. Members that
// never came up (16 dead endpoints a cluster lists, a remembered set that
// is gone) do not count: they held panic mode on for good once a static
// backend restarted. All or most apiservers failing at the same time is
// more likely a fault here (descriptors, memory, the node's network) than
// theirs. In panic mode the daemon cuts no open connection, and Pick
// balances over the set that was healthy just before (the last known
// good) when nothing better is left. It ends once half are healthy again.
// changed is the backend whose state just moved from `from`, or nil.
func (p *Pool) reassessLocked(changed *Backend, from State, now time.Time) bool {
	healthy, total := 0, 0
	for _, b := range p.Backends() {
		a := b.load()
		if a.rotation != InRotation || !a.known {
			continue
		}
		total++
		if a.state.Healthy() {
			healthy++
		}
	}
	low := total > 0 && 2*healthy < total
	switch {
	case !p.panicking.Load() && low && changed != nil && from.Healthy() && !changed.Healthy():
		p.markGood(changed, now)
		p.panicSince = now
		p.panicking.Store(true)
		return true
	case p.panicking.Load() && !low:
		p.clearGood(now)
		p.panicking.Store(false)
		p.panicSince = time.Time{}
		return true
	}
	return false
}

// markGood marks the last known good set: the backends healthy now and
// the one that just went down.
func (p *Pool) markGood(changed *Backend, now time.Time) {
	for _, b := range p.Backends() {
		if a := b.load(); a.state.Healthy() || b == changed {
			a.good = true
			b.store(a, now)
		}
	}
}

func (p *Pool) clearGood(now time.Time) {
	for _, b := range p.Backends() {
		a := b.load()
		a.good = false
		b.store(a, now)
	}
}

// Good reports whether b is in the last known good set of the current
// panic.
func (b *Backend) Good() bool { return b.load().good }
