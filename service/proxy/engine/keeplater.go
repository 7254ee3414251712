package engine

import "time"

// keepLater gives a connection's backend socket its keepalive and user
// timeout (Conn.KeepBackendAlive) once the connection has outlived an
// idle check's period, without a timer of its own: a short connection (a
// request, a probe through the VIP) ends before and never pays the four
// system calls, and a direction that stays parked from its start has no
// idle check to do it. Sessions wait in two generations: one queued
// during a period is served at the end of the next, so between one and
// two periods after it began, as a direction's own idle check would.
type keepLater struct {
	mu      Mutex[keepLock]
	waiting []Keeper // queued since the last tick
	due     []Keeper // queued before it: served at the next
	armed   bool     // a tick is scheduled
}

// Keeper is a connection whose backend socket waits for its keepalive:
// a Relay, or another engine's connection.
type Keeper interface {
	KeepsAlive() bool // options are wanted at all
	Live() bool       // a direction still runs or is parked
	KeepBackendAlive()
}

// KeepAliveLater queues s for its backend socket's options (no-op when
// none are wanted).
func (r *Engine) KeepAliveLater(s Keeper) {
	if !s.KeepsAlive() {
		return
	}
	k := &r.keep
	k.mu.Lock()
	k.waiting = append(k.waiting, s)
	if !k.armed {
		k.armed = true
		time.AfterFunc(r.idleCheck, r.keepAliveTick)
	}
	k.mu.Unlock()
}

// keepAliveTick serves the sessions due and ages the waiting ones; it
// schedules itself again while any wait.
func (r *Engine) keepAliveTick() {
	k := &r.keep
	k.mu.Lock()
	due := k.due
	k.due, k.waiting = k.waiting, nil
	k.armed = len(k.due) > 0
	if k.armed {
		time.AfterFunc(r.idleCheck, r.keepAliveTick)
	}
	k.mu.Unlock()
	for _, s := range due {
		if s.Live() {
			s.KeepBackendAlive()
		}
	}
}
