package engine

import "sync/atomic"

// fdRefs counts the uses of a descriptor that its owner closes while
// other goroutines may still be using it (a parker passing a message on,
// a direction writing): the number must stay open until the last of them
// is done, or a new socket could take it and receive their bytes. The
// owner holds a reference from the start; Close marks the count closed
// and drops it. Whoever drops the last reference closes the descriptor.
// os.File's poll.FD does the same, and a Close that waits for its users.
type fdRefs struct {
	state atomic.Uint64 // refsClosed | the number of references
}

const refsClosed = 1 << 63

// init gives the owner its reference.
func (r *fdRefs) init() { r.state.Store(1) }

// incref takes a reference; false once closed.
func (r *fdRefs) incref() bool {
	for {
		old := r.state.Load()
		if old&refsClosed != 0 {
			return false
		}
		if r.state.CompareAndSwap(old, old+1) {
			return true
		}
	}
}

// markClosed refuses references from now on; false if it already was.
// The caller then drops the owner's reference (decref).
func (r *fdRefs) markClosed() bool {
	return r.state.Or(refsClosed)&refsClosed == 0
}

// decref drops a reference and reports whether it was the last one
// after markClosed: the caller must close the descriptor.
func (r *fdRefs) decref() bool {
	return r.state.Add(^uint64(0)) == refsClosed
}
