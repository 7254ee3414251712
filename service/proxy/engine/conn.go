package engine

import (
	"sync/atomic"

	"github.com/vipproxy/vipproxy/service/balance"
)

// Conn is the connection layer's side of a relayed connection (the
// session of service/proxy: pick, dial, replay, failover, evacuation, and
// the only closer of its sockets). The engine moves the bytes and calls
// back through Conn: it never closes a Socket it did not create.
type Conn interface {
	// Client is the client Socket.
	Client() Socket
	// Current is the backend connection and its backend, as they are now
	// (a failover changes them).
	Current() (Socket, *balance.Backend)
	// Relaying records the relay of the connection, before it starts:
	// the connection layer stops its parking before it closes a Socket
	// (Relay.StopParking), and asks it to freeze for a handover.
	Relaying(r *Relay)

	// Keep keeps client bytes for a replay while the backend has not
	// answered and returns the backend connection to write them to; nil
	// once the connection is bound: write to Current.
	Keep(chunk []byte) Socket
	// KeptWriteFailed records that a write of kept bytes to conn failed.
	KeptWriteFailed(conn Socket, err error)
	// ResetTaken reports whether a write of kept bytes took conn's reset.
	ResetTaken(conn Socket) bool
	// MarkAnswered binds the connection: the backend sent a byte.
	MarkAnswered()
	// Answered reports whether the connection is bound (no replay).
	Answered() bool
	// Failover replays the client's bytes on another backend after the
	// backend closed or reset before answering, and returns the new
	// backend connection, or nil when the failure goes to the client.
	Failover() Socket
	// ClientFinished records that the client half-closed (or failed) and
	// returns the backend connection to pass that on to.
	ClientFinished() Socket
	// ClientDone reports whether ClientFinished was called: the client
	// half-closed.
	ClientDone() bool

	// KeepsAlive reports whether the backend Socket wants keepalive
	// options once the connection outlives an idle check;
	// KeepBackendAlive sets them.
	KeepsAlive() bool
	KeepBackendAlive()

	// IsClosed reports whether CloseSockets was called.
	IsClosed() bool
	// CloseSockets closes both sockets, AbortSockets with a reset.
	CloseSockets()
	AbortSockets()
	// End ends the connection once both directions ended (its sockets
	// closed); Abort closes and ends one whose relay could not start.
	End()
	Abort()
}

// Relay is one connection's relay: its two directions, client→backend
// (Up, reading the client) and backend→client (Down, reading the
// backend), in one allocation.
type Relay struct {
	conn Conn
	dirs [2]direction
	live atomic.Int32 // directions still running or parked
	// handover asks the directions to stop at a quiet point (freeze.go).
	handover atomic.Bool
	// clientSent is when the parker last passed the client's bytes on
	// (unix ns; the largest int64 while the client's direction runs on a
	// goroutine): a backend's message then is a push (a watch event), not
	// an answer (coalescer).
	clientSent atomic.Int64
}

// The directions of a Relay, by the Socket each reads.
const (
	Up   = 0 // client→backend: reads the client Socket
	Down = 1 // backend→client: reads the backend Socket
)

// StopParking stops the parking of the direction that reads the Socket
// of side (Up, Down) before that Socket is closed: closing a Socket
// silently drops it from the parker's epoll, and a parked reader would
// never learn of it. Nil-safe (no relay yet, or a plain engine's). Call
// it without the session's lock (it takes pk.mu: the lock order).
func (r *Relay) StopParking(side int) {
	if r == nil {
		return
	}
	r.dirs[side].stopParking()
}

// Live reports whether a direction still runs or is parked.
func (r *Relay) Live() bool { return r.live.Load() > 0 }

// KeepsAlive and KeepBackendAlive make a Relay a Keeper.
func (r *Relay) KeepsAlive() bool  { return r.conn.KeepsAlive() }
func (r *Relay) KeepBackendAlive() { r.conn.KeepBackendAlive() }

// IdleMark reports whether both directions are parked, that is no byte
// moved either way for a while, and a mark that changes each time one of
// them parks anew: two looks that see idle with the same mark mean that
// nothing moved in between. Nil-safe: not relaying yet is not idle.
func (r *Relay) IdleMark() (mark uint64, idle bool) {
	if r == nil {
		return 0, false
	}
	var parks [2]uint32
	for i := range r.dirs {
		d := &r.dirs[i]
		d.pk.mu.Lock()
		parked := d.pk.parked && !d.pk.watching // half-closed: not idle
		parks[i] = d.pk.parks
		d.pk.mu.Unlock()
		if !parked {
			return 0, false
		}
	}
	return uint64(parks[0])<<32 | uint64(parks[1]), true
}
