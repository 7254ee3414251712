package engine

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A parker woken for every message pays a full wake each: Go's poller's
// blocking wait reports the parker's epoll, the parker's own wait fetches
// the message, and the scheduler polls once more before the thread sleeps
// again, three epoll calls and a context switch for one read and one
// write. In a storm (thousands of watches, each with an event now and
// then, or their TLS handshakes) messages come one at a time, from a few
// microseconds to a millisecond apart, and that is what each one cost.
//
// So the parker coalesces its wakes, as a network card moderates its
// interrupts, but only for pushes: woken soon after it went to wait
// (within coalesceGap) to pass on backends' messages that answer nothing
// (their clients sent nothing for coalesceGap: watch events), it pauses
// (coalescePause) and serves in one round all that came meanwhile before
// it waits again. It pauses once per wake, so Go's poller (accepts,
// dials, health checks, directions on goroutines) is served between
// pauses. A pause after a request, an answer or a handshake's message
// would hold back the next one of the same exchange, whose client waits
// for it (one connection's ping-pong: 21 times slower): those never pause.
// A message that arrives during a pause waits for its end (1 ms at most);
// a quiet proxy never pauses.
//
// Measured on 2026-12-05 (docs/performance.md): the storms' proxy CPU about
// a tenth lower, the connection path's figures unchanged.
const (
	coalesceGap   = time.Millisecond
	coalescePause = time.Millisecond
)

// coalescer is the parker loop's own state for coalescing (no lock: one
// goroutine uses it).
type coalescer struct {
	now   func() time.Time    // time.Now, or a test's clock
	sleep func(time.Duration) // sleepHoldingThread, or a test's

	waitFrom time.Time // when the parker last went back to wait
	quick    bool      // this wake came within coalesceGap of the wait
	paused   bool      // this wake has paused
}

func newCoalescer() coalescer {
	return coalescer{now: time.Now, sleep: sleepHoldingThread}
}

// woke starts a wake of the parker.
func (c *coalescer) woke() {
	c.quick = c.now().Sub(c.waitFrom) < coalesceGap
	c.paused = false
}

// pauseInsteadOfWait is asked when the parker found its epoll drained
// after a round that passed on pushes only (pushesOnly) or not: the first
// time in a quick wake after pushes only, it pauses and reports true (the
// parker then looks again); otherwise it notes that the parker waits from
// now.
func (c *coalescer) pauseInsteadOfWait(pushesOnly bool) bool {
	if !c.quick || !pushesOnly || c.paused {
		c.waitFrom = c.now()
		return false
	}
	c.paused = true
	c.sleep(coalescePause)
	return true
}

// isPush reports whether the message d just passed on in place (at
// d.pk.lastMsg, pk.mu held) is a backend's that answers nothing: its
// client sent nothing for coalesceGap.
func (d *direction) isPush() bool {
	return !d.toBackend && d.pk.lastMsg.UnixNano()-d.rel.clientSent.Load() >= int64(coalesceGap)
}

// sleepHoldingThread sleeps d in a raw nanosleep: the thread and its
// processor stay with the parker. A sleep through Go's scheduler would
// wait in Go's poller, which every new message wakes through the parker's
// nested epoll: the very wakes the pause saves. A signal (the runtime's
// preemption) may end it early, which only shortens the pause.
func sleepHoldingThread(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
