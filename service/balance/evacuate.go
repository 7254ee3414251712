package balance

import (
	"slices"
	"time"
)

// Evacuation is what the pool does with the open connections of a backend
// that goes down (balance.close_on_down): long watches must reconnect to a
// healthy apiserver, and a connection still waiting for the backend's
// first byte is replayed on another one (Backend.EvacuateAll).
type Evacuation struct {
	// On takes the connections off a down backend; off, they stay until
	// the backend or the client ends them.
	On bool
	// Grace is how long after the mark-down (one check interval): when
	// every backend fails within the same interval, the first ones to go
	// down must not lose their connections before the pool sees that all
	// of them did (panic mode, which cuts nothing).
	Grace time.Duration
}

// SetEvacuation sets what happens to a down backend's connections (at
// start and on reload). Until it is called, nothing is evacuated. Grace
// applies to the mark-downs that follow; On is read when a grace ends.
func (p *Pool) SetEvacuation(e Evacuation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evacuation = e
}

// SetEvacuated sets a func told how many connections an evacuation took
// off a backend (one or more), for the log. It runs outside the pool's
// lock.
func (p *Pool) SetEvacuated(f func(b *Backend, n int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evacuated = f
}

// followLocked starts what a transition brings to open connections: a
// backend its checks take down (not from Recovering: it was down already;
// a self-loop's mark-down cuts nothing) is evacuated after the grace
// unless the pool panicked; one that comes up ends the wait of the down
// backends whose evacuation waited for a backend that takes new
// connections. It returns those, to evacuate outside the lock (an
// evacuated connection may dial again, and report).
func (p *Pool) followLocked(tr Transition) (resume []*Backend) {
	if !tr.Changed() {
		return nil
	}
	if isCheck, _ := tr.Event.check(); isCheck && tr.To == Down && tr.From != Recovering && !tr.Panic {
		b := tr.Backend
		time.AfterFunc(p.evacuation.Grace, func() { p.evacuate(b) })
	}
	if tr.To.Healthy() {
		resume = p.awaitingUp
		p.awaitingUp = nil
	}
	return resume
}

// evacuate takes the connections off b once its grace is over, if it is
// still down, still in the pool, evacuation is on and the pool is not in
// panic mode. With no backend that takes new connections it waits for
// one (followLocked): cutting them would only lose them. That happens at
// start-up when every first check fails (a slow host), and connections
// went to a down backend as the last resort: a VM's first connection was
// closed this way while its backend answered it.
func (p *Pool) evacuate(b *Backend) {
	if !p.evacuable(b) {
		return
	}
	n := b.EvacuateAll()
	p.mu.Lock()
	report := p.evacuated
	p.mu.Unlock()
	if n > 0 && report != nil {
		report(b, n)
	}
}

// evacuable says whether b's connections go now. A backend that must wait
// for another to come up joins the waiting ones in the same lock that
// every transition takes: none can come up in between unseen.
func (p *Pool) evacuable(b *Backend) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.Backends()
	if !p.evacuation.On || p.panicking.Load() || b.State() != Down || !slices.Contains(list, b) {
		return false
	}
	if !slices.ContainsFunc(list, (*Backend).TakesConnections) {
		if !slices.Contains(p.awaitingUp, b) {
			p.awaitingUp = append(p.awaitingUp, b)
		}
		return false
	}
	return true
}

// evacuateAll evacuates each of list (a backend came up).
func (p *Pool) evacuateAll(list []*Backend) {
	for _, b := range list {
		p.evacuate(b)
	}
}
