package engine

// Freezing for a handover (service/proxy handover.go): a connection is
// handed over only at its quiet point, when neither direction holds a
// byte in user space or in a splice pipe. A direction is quiet when it
// is parked (the parker passes a message on whole or not at all) or when
// its goroutine is between two rounds of its copy loop (run), where every
// byte read has been written. Freezing takes a parked direction out of
// the parker, and stops a running one at its next round
// (stopForHandover); a frozen direction has no goroutine and no parker,
// so nothing touches its sockets until they are released (handed over)
// or thawed (the handover did not take them).

import "errors"

// errFrozen ends a direction's goroutine at a quiet point for a handover.
var errFrozen = errors.New("direction frozen for a handover")

// Reasons a connection is not frozen (TryFreeze).
const (
	// ReasonReplayWindow: the backend had not answered yet, so the
	// client's first bytes were still kept for a replay.
	ReasonReplayWindow = "replay_window"
	// ReasonHalfClosed: the backend had half-closed, or the connection
	// was being closed (a client's half-close is handed over).
	ReasonHalfClosed = "half_closed"
	// ReasonBusy: a write still waited for a peer that did not read.
	ReasonBusy = "busy"
)

// stopForHandover is run's check at the top of each round, where the
// direction holds nothing: true if a handover asked the connection to
// stop and the direction is now frozen.
func (d *direction) stopForHandover() bool {
	if !d.rel.handover.Load() || !d.rel.conn.Answered() {
		return false
	}
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	if d.pk.closing {
		return false // its socket is being closed: let it see that
	}
	d.returnPipe() // empty between rounds
	d.pk.frozen = true
	return true
}

// freezeParked freezes a parked direction (a frozen one stays so) and
// reports whether it is frozen.
func (d *direction) freezeParked() bool {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	if d.pk.frozen {
		return true
	}
	if !d.pk.parked || !d.rel.conn.Answered() {
		return false
	}
	d.unparkLocked(true)
	d.pk.frozen = true
	return true
}

// thaw lets a frozen direction run again, parked or on a goroutine; one
// that had ended is watched for a reset again (watchForReset).
func (d *direction) thaw() {
	d.pk.mu.Lock()
	was := d.pk.frozen
	d.pk.frozen = false
	d.pk.mu.Unlock()
	switch {
	case !was:
	case d.ended():
		d.watchForReset()
	default:
		d.begin()
	}
}

// ended reports whether d is the client→backend direction and read the
// client's end (Conn.ClientFinished).
func (d *direction) ended() bool {
	return d.toBackend && d.rel.conn.ClientDone()
}

// TryFreeze asks the relay to stop at a quiet point and reports whether
// both directions are frozen now; otherwise why not. Nil-safe: no relay
// yet (or a plain engine's) is in the replay window.
func (r *Relay) TryFreeze() (bool, string) {
	if r == nil {
		return false, ReasonReplayWindow
	}
	r.handover.Store(true)
	clientDone, closed, live := r.conn.ClientDone(), r.conn.IsClosed(), r.live.Load()
	switch {
	case !r.conn.Answered():
		return false, ReasonReplayWindow
	case closed || live == 0 || live == 1 && !clientDone:
		return false, ReasonHalfClosed
	}
	// A client that half-closed: its FIN was passed on (the backend's
	// socket is shut for writing) and its direction is parked watching
	// for a reset, which freezeParked stops as any parked direction. The
	// next daemon reads the client's end again and passes it on again (a
	// no-op): the pair is handed over as any other.
	up, down := r.dirs[Up].freezeParked(), r.dirs[Down].freezeParked()
	if up && down {
		return true, ""
	}
	if live == 1 {
		return false, ReasonHalfClosed // its end not watched yet, or no parker
	}
	for i := range r.dirs {
		d := &r.dirs[i]
		d.pk.mu.Lock()
		closing := d.pk.closing && !d.pk.frozen
		d.pk.mu.Unlock()
		if closing {
			return false, ReasonHalfClosed
		}
	}
	return false, ReasonBusy
}

// Thaw undoes TryFreeze: the relay runs again. Nil-safe.
func (r *Relay) Thaw() {
	if r == nil {
		return
	}
	r.handover.Store(false)
	for i := range r.dirs {
		r.dirs[i].thaw()
	}
}
