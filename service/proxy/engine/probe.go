package engine

import "time"

// The engine's counts and knobs, for the tests of the connection layer
// (service/proxy), which run it under their sessions.

// Goroutines counts the directions resumed on a goroutine of their own.
func (r *Engine) Goroutines() uint64 { return r.goroutines.Load() }

// EmptyReads counts the relay's reads that found nothing (EAGAIN).
func (r *Engine) EmptyReads() uint64 { return r.emptyReads.Load() }

// Parkers is the number of parkers; 0 if no epoll could be made.
func (r *Engine) Parkers() int { return len(r.parkers) }

// ParkerEpolls are the descriptors of the parkers' epolls.
func (r *Engine) ParkerEpolls() []int {
	fds := make([]int, 0, len(r.parkers))
	for _, p := range r.parkers {
		fds = append(fds, p.epfd)
	}
	return fds
}

// KeepParkers closes all parkers but the first n, before any connection
// is relayed: with 0, directions never park.
func (r *Engine) KeepParkers(n int) {
	if n >= len(r.parkers) {
		return
	}
	for _, p := range r.parkers[n:] {
		p.close()
	}
	r.parkers = r.parkers[:n]
}

// SetIdleCheck sets the period of a direction's idle check (parkAfter),
// before any connection is relayed.
func (r *Engine) SetIdleCheck(d time.Duration) { r.idleCheck = d }

// PipesLent is the number of splice pipes lent to directions now;
// PipesPooled those idle in the pool.
func (r *Engine) PipesLent() int64 { return r.pipes.lent.Load() }

func (r *Engine) PipesPooled() int {
	r.pipes.mu.Lock()
	defer r.pipes.mu.Unlock()
	return len(r.pipes.free)
}

// DrainPipes closes the pipes idle in the pool.
func (r *Engine) DrainPipes() { r.pipes.drain() }

// The engine's constants that the connection layer's tests size their
// traffic and waits by.
const (
	CopyBufSize = copyBufSize // a read that fills it switches to splice
	ParkAfter   = parkAfter   // the idle check's period
	BusyGap     = busyGap     // a message this soon after the last is busy
	BusyStreak  = busyStreak  // so many busy in a row leave the parker
	CoalesceGap = coalesceGap // a wake this soon after a wait may pause
)
