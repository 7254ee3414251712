package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// parkAfter is how long a direction may wait for data before it gives up
// its goroutine. It checks for progress once per period, so an idle
// direction parks between one and two periods after its last byte. Short,
// because a burst of new connections holds a goroutine (and its stack)
// per direction until they park: 250 ms against 500 ms cut the RSS of
// 9,900 idle connections from 5.7 to 4.8 KB each, and since the parker
// passes small messages on itself (serve), parking costs one epoll_ctl
// and no later wake for most traffic: 50 ms against 250 ms halved the
// goroutines at the peak of a storm of 1,500 TLS watches connecting at
// once (1,861 to 906, stacks 10 to 6 MB, peak RSS 40 to 34 MB). Since
// then directions start parked (direction.begin), so the period matters
// only to one that woke for bulk or a write that had to wait; waking costs
// an epoll_ctl and a goroutine start, parking again another epoll_ctl.
const parkAfter = 50 * time.Millisecond

// errParked ends a direction's goroutine while the direction lives on,
// parked: the parker resumes it on a fresh goroutine when data arrives.
var errParked = errors.New("direction parked")

// parker holds directions without a goroutine each: an idle connection
// costs two sockets and a little heap, not two goroutine stacks, and the
// parker passes small messages on itself. A parked direction's source
// socket sits in the parker's private epoll (parkEvents); that epoll's
// own descriptor is waited on through Go's poller, so no thread blocks on
// it, and one goroutine serves every direction parked there. The Engine
// has one parker per processor, a session's two directions on the same.
//
// Closing a socket silently takes it out of an epoll, so a socket some
// direction reads is closed through closeClient or closeBackend
// (session.go), which first
// stops that direction's parking: it resumes on a goroutine, whose next
// use of the socket sees the close (fileConn).
type parker struct {
	epfd int
	file *os.File // owns epfd

	mu     Mutex[parkerLock]
	parked map[int32]*direction // by source socket descriptor
	// connecting are the dials whose connect is in progress, by socket
	// descriptor, each told once on its channel when it ended (waitConnect).
	connecting map[int32]chan struct{}
	closed     bool // epfd is closed: its number may be reused

	buf []byte // the loop's own, for messages relayed in place (serve)
	// relayed counts the messages passed on in place, without waking
	// their direction (tests).
	relayed atomic.Uint64
	// calls counts the parker's epoll_wait and epoll_ctl calls (tests).
	calls atomic.Uint64
	// pauses counts its coalescing pauses (coalescer; tests).
	pauses atomic.Uint64
}

// parkEvents is how a parked socket is watched: edge-triggered, so that
// a message relayed in place needs no re-arm (an epoll_ctl per message
// with a one-shot entry: 6 % of the proxy's CPU in the at-once storm's
// profile). Edge-triggered is enough because the parker keeps a socket
// only after a read that drained it (shorter than its buffer, or EAGAIN),
// and each later arrival raises a new event; whatever else it read
// (the end of the stream, bulk, a write that must wait) takes the socket
// out of the epoll. A read stops at TCP's urgent mark, so a short read
// does not mean that the socket is drained while urgent data is pending:
// EPOLLPRI says it is, and the parker then reads on until EAGAIN (serve).
const parkEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET

// newParker starts the parker's goroutine; it ends when close is called.
func newParker() (*parker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create idle epoll: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("idle epoll non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(epfd), "vipproxy-idle-epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("idle epoll: %w", err)
	}
	p := &parker{epfd: epfd, file: f, parked: make(map[int32]*direction), connecting: make(map[int32]chan struct{}), buf: make([]byte, copyBufSize)}
	go p.loop(raw)
	return p, nil
}

func (p *parker) close() {
	p.mu.Lock()
	p.closed = true
	for fd, done := range p.connecting {
		delete(p.connecting, fd)
		done <- struct{}{} // the dial goes on waiting in Go's poller
	}
	p.mu.Unlock()
	p.file.Close()
}

// loop serves parked directions whose socket turned readable (data, end
// of stream or an error). It serves them inside the callback of one
// RawConn.Read that never returns true: a new event always reaches Go's
// poller (the inner epoll wakes its waiters on every one), and a readiness
// already reported stays pending there between rounds, so a round costs
// one epoll_wait of ours. A fresh RawConn.Read per round forgets that
// readiness and needed a second, empty epoll_wait before each wait. In a
// storm of pushes it pauses before it waits (coalescer, coalesce.go).
func (p *parker) loop(raw syscall.RawConn) {
	events := make([]unix.EpollEvent, 128)
	ready := make([]readied, 0, len(events))
	c := newCoalescer()
	raw.Read(func(fd uintptr) bool {
		c.woke()
		for {
			n, err := epollWaitNow(int(fd), events)
			p.calls.Add(1)
			if err == unix.EINTR {
				continue
			}
			pushesOnly := n > 0 && p.serveEvents(events[:n], ready)
			if n < len(events) { // drained when we looked
				if c.pauseInsteadOfWait(pushesOnly) {
					p.pauses.Add(1)
					continue
				}
				return false // wait in Go's poller
			}
		}
	})
	// Read returned: the parker's epoll was closed.
}

// serveEvents serves the directions and dials the events are for, and
// reports whether all it did was pass on pushes (isPush); ready is room
// for them, left empty.
func (p *parker) serveEvents(events []unix.EpollEvent, ready []readied) (pushesOnly bool) {
	pushesOnly = true
	p.mu.Lock()
	for _, ev := range events {
		if d := p.parked[ev.Fd]; d != nil {
			ready = append(ready, readied{d, ev.Events})
		} else if done := p.connecting[ev.Fd]; done != nil {
			delete(p.connecting, ev.Fd)
			done <- struct{}{} // buffered, and sent once
			pushesOnly = false
		}
	}
	p.mu.Unlock()
	for i, r := range ready {
		pushesOnly = p.serve(r.d, r.events) && pushesOnly
		ready[i] = readied{} // no direction kept alive by the slice
	}
	return pushesOnly
}

// readied is a parked direction with the events epoll reported for it.
type readied struct {
	d      *direction
	events uint32
}

// endEvents say the peer's FIN (or a reset, an error) is in: more than
// a read may take. Edge-triggered, that end raises no new event once it
// came with the data, so the parker then reads on to the end
// (relayParked's toEnd).
const endEvents = unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR

// serve handles a parked direction whose source turned readable. Small
// messages (a TLS handshake, a watch event, a lease renewal: most of a
// control plane's traffic) are passed on right here and the direction
// stays parked: a read and a write, as an event loop does. So is the end
// of the stream or an error, when nothing is left to write: the parker
// finishes the direction itself (a short connection never needs a
// goroutine). A write that would wait, a read that fills the buffer
// (bulk), or a backend that closed before answering (a replay) resume the
// direction on a goroutine of its own.
func (p *parker) serve(d *direction, events uint32) (push bool) {
	d.pk.mu.Lock()
	if !d.pk.parked {
		d.pk.mu.Unlock()
		return false // unparked meanwhile (stopParking)
	}
	if d.pk.watching {
		p.serveWatch(d, events) // unlocks d.pk.mu
		return false
	}
	if d.relayParked(p.buf, events&(endEvents|unix.EPOLLPRI) != 0) {
		p.relayed.Add(1)
		push = d.isPush()
		d.pk.mu.Unlock()
		return push
	}
	end := d.parkedEnd()
	if end != nil {
		// Finished: it never parks again, and its source is closed when
		// the session ends (the other direction may still write to it).
		d.pk.closing = true
	}
	resume := d.unparkLocked(end == nil)
	d.pk.mu.Unlock()
	switch {
	case !resume:
	case end != nil:
		d.finish(end)
	default:
		go d.wake()
	}
	return false
}

// add watches fd for d; false if the kernel refused (d then keeps running).
func (p *parker) add(fd int32, d *direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.parked[fd] = d
	ev := unix.EpollEvent{Events: parkEvents, Fd: fd}
	p.calls.Add(1)
	if err := epollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(p.parked, fd)
		return false
	}
	return true
}

// remove stops serving fd for d, and takes fd out of the epoll if
// stillOpen (unparkLocked).
func (p *parker) remove(fd int32, d *direction, stillOpen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parked[fd] == d {
		delete(p.parked, fd)
	}
	if stillOpen && !p.closed {
		p.calls.Add(1)
		epollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// waitConnect waits until the connect in progress on fd ends, or the
// deadline (zero: none) passes, and returns how it ended (w.check); false
// if the parker cannot watch fd (the caller then waits in Go's poller). A
// dial on a real network waits here rather than promoting its socket
// (fileConn): the duplicate, its poller entry and a close through the
// scheduler that wakes sysmon, for every connection.
func (p *parker) waitConnect(fd int32, w *connectWait, deadline time.Time) (bool, error) {
	for {
		done := p.watchConnect(fd)
		if done == nil {
			return false, nil
		}
		var timer *time.Timer
		var expired <-chan time.Time
		if !deadline.IsZero() {
			timer = time.NewTimer(time.Until(deadline))
			expired = timer.C
		}
		select {
		case <-done:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
		p.unwatchConnect(fd)
		if w.check(uintptr(fd)) {
			return true, w.err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return true, os.ErrDeadlineExceeded
		}
	}
}

// watchConnect watches fd for the end of its connect (writable, or an
// error), once; nil if the kernel refused or the parker is closed.
func (p *parker) watchConnect(fd int32) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: fd}
	p.calls.Add(1)
	if err := epollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return nil
	}
	done := make(chan struct{}, 1)
	p.connecting[fd] = done
	return done
}

// unwatchConnect takes fd out of the epoll: the socket is parked later,
// perhaps with another parker.
func (p *parker) unwatchConnect(fd int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.connecting, fd)
	if !p.closed {
		p.calls.Add(1)
		epollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// count is the number of parked directions.
func (p *parker) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

// parkState is a direction's standing with the parker, under mu. While
// the direction is parked it has no goroutine, and the parker, under mu,
// may move a message and so touch the direction's n, out, buf and
// useSplice; otherwise only the direction's goroutine does.
type parkState struct {
	mu      Mutex[parkLock]
	parker  *parker // the session's; nil: never parks
	parked  bool    // in the parker, no goroutine
	parks   uint32  // times parked or relayed in place: a drain tells idle from busy (session.IdleMark)
	closing bool    // the source socket is being closed: do not park
	frozen  bool    // stopped for a handover: neither parked nor running (handover.go)
	// watching: the direction read its end and is parked for a reset of
	// its source only (watchForReset); it never resumes.
	watching bool
	// inEpoll: the source is still in the parker's epoll, as parked
	// (serve leaves a source that it read to the end there).
	inEpoll bool
	// reset is the error the parker read from a backend that failed
	// before answering: the goroutine's replay, or the client, gets it
	// (a second read would say EOF after a reset).
	reset   error
	srcFD   int32     // the source descriptor while parked
	stash   error     // end of stream or error the parker read (flushParked)
	lastMsg time.Time // when the parker last passed a message on (busy)
	streak  int       // messages passed on, each soon after the one before

	// relayParked's read and write go through RawConn.Control with one
	// callback bound per direction (ctl, at its first message) and their
	// arguments and results here: with a closure each, a relayed message
	// cost five heap allocations.
	ctl     func(uintptr)
	writing bool   // ctl writes io (else reads into it)
	io      []byte // the bytes to read into or to write; a write leaves the rest
	n       int    // what the read returned
	err     error
}

// park hands the direction to the parker; false means it must go on
// running (its sockets are being closed, or the kernel refused).
func (d *direction) park() bool {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	if d.pk.closing || d.pk.parker == nil {
		return false
	}
	// Control holds the descriptor open: it cannot be closed (and its
	// number reused) while it goes into the epoll.
	ok := false
	err := d.srcRaw.Control(func(fd uintptr) {
		d.pk.srcFD = int32(fd)
		ok = d.pk.parker.add(d.pk.srcFD, d)
	})
	d.pk.parked = ok && err == nil
	d.pk.inEpoll = d.pk.parked
	if d.pk.parked {
		d.pk.parks++
		d.pk.streak = 0
		if d.toBackend {
			d.rel.clientSent.Store(time.Now().UnixNano())
		}
	}
	return d.pk.parked
}

// unparkLocked takes the direction out of the parker (d.pk.mu held); true
// if it was parked, and the caller must then resume or finish it. The
// socket leaves the epoll only if it stays open (stillOpen): closing it
// takes it out by itself, so a socket that is being closed (stopParking)
// or read to its end (serve) costs no epoll_ctl, and its events until then
// find no direction.
func (d *direction) unparkLocked(stillOpen bool) bool {
	if !d.pk.parked {
		return false
	}
	d.pk.parked = false
	d.pk.parker.remove(d.pk.srcFD, d, stillOpen)
	d.pk.inEpoll = d.pk.inEpoll && !stillOpen
	return true
}

// stopParking is called before the direction's source socket is closed
// by anyone else: a parked direction resumes (and sees the close), a
// running one will not park until it has a new source (setSrc).
func (d *direction) stopParking() {
	if d == nil {
		return
	}
	d.pk.mu.Lock()
	d.pk.closing = true
	resume := d.unparkLocked(false) && !d.pk.watching
	d.pk.watching, d.pk.inEpoll = false, false // the close takes it out
	d.pk.mu.Unlock()
	if resume {
		go d.wake()
	}
}

// allowParking is called when the direction has a new source socket.
func (d *direction) allowParking() {
	d.pk.mu.Lock()
	d.pk.closing, d.pk.inEpoll = false, false
	d.pk.mu.Unlock()
}

// relayParked passes on, under pk.mu and without waiting, what the
// parked direction's source holds, reading on to the end of the stream
// when toEnd (edge-triggered, the end raises no event of its own once it
// came with the data; urgent data stops a read short of the rest,
// parkEvents); true if it did all of it and the direction may
// stay parked. Otherwise the bytes it could not write wait in d.out, and
// an end of stream or error it read in d.pk.stash (parkedEnd,
// flushParked).
func (d *direction) relayParked(buf []byte, toEnd bool) bool {
	if d.pk.ctl == nil {
		d.pk.ctl = d.parkIO
	}
	for {
		d.pk.writing, d.pk.io = false, buf
		err := d.srcRaw.Control(d.pk.ctl)
		n, rerr := d.pk.n, d.pk.err
		d.pk.io, d.pk.err = nil, nil
		if err != nil {
			return false // closed under us: the goroutine sees it
		}
		switch {
		case rerr == unix.EAGAIN:
			return true // nothing (more) after all
		case d.sessRead != nil && (rerr != nil || n == 0):
			// Closed before answering: the goroutine replays elsewhere,
			// with the reset read here (after a reset, reads return EOF)
			// or the end of stream it reads again.
			d.pk.reset = rerr
			return false
		case rerr != nil:
			d.pk.stash = rerr
			return false
		case n == 0:
			d.pk.stash = io.EOF
			return false
		}
		if !d.passParked(buf[:n], len(buf)) || d.busy() {
			return false
		}
		if d.toBackend {
			d.rel.clientSent.Store(d.pk.lastMsg.UnixNano())
		}
		if !toEnd {
			return true // a short read drained the socket
		}
	}
}

// passParked writes a message the parker read, without waiting; false if
// some of it must wait (left in d.out for the goroutine) or the buffer
// was full (bulk: the goroutine splices the rest). The backend's first
// byte binds the session; until then the client's bytes are kept for a
// replay (Conn.Keep) and go to the backend connection they were kept
// for, where a failure is not this direction's.
func (d *direction) passParked(msg []byte, bufLen int) bool {
	if d.sessRead != nil {
		d.sessRead.MarkAnswered()
		d.sessRead = nil
	}
	dst, kept := d.dstRaw, Socket(nil)
	var err error
	if d.sessWrite != nil {
		if kept = d.sessWrite.Keep(msg); kept != nil {
			dst, err = kept.SyscallConn()
		} else if err := d.bindBackend(); err != nil {
			d.pk.stash = err
			return false
		} else {
			dst = d.dstRaw
		}
	}
	out := msg
	if err == nil {
		d.pk.writing, d.pk.io = true, msg
		err = dst.Control(d.pk.ctl)
		out = d.pk.io
		if kept != nil && d.pk.err != nil {
			d.sessWrite.KeptWriteFailed(kept, d.pk.err)
		}
		d.pk.io, d.pk.err = nil, nil
	}
	if kept != nil && err != nil {
		err, out = nil, nil // replaced by a failover, which replays these bytes
	}
	d.account(len(msg) - len(out))
	d.pk.parks++ // bytes moved: a drain must not take the connection for idle
	if len(msg) == bufLen && kept == nil {
		// Bulk: splice the rest, but not while the bytes are kept
		// for a replay (copyBufSize).
		d.useSplice = true
	}
	if len(out) > 0 {
		d.kept = kept
		d.buf = d.r.bufs.Get().(*[]byte)
		d.out = (*d.buf)[:copy(*d.buf, out)]
	}
	return err == nil && len(out) == 0 && len(msg) < bufLen
}

// A parked direction whose messages follow each other closely leaves the
// parker for a goroutine of its own (busy): one busy connection is
// served faster by its goroutine, woken straight from Go's poller, than
// through the parker's epoll nested in it (one connection's ping-pong,
// proxy CPU a round trip in one run: 52.9 µs all in the parker, 42.7 with
// this, HAProxy 45.1), while many connections, each
// with a message now and then (watches, a storm's handshakes), are served
// cheaper by the parker, which passes on all that came at once in one
// round. The goroutine parks again once idle (parkAfter).
const (
	busyGap    = time.Millisecond
	busyStreak = 8
)

// busy notes a message passed on (pk.mu held) and reports whether the
// direction is busy enough to leave the parker.
func (d *direction) busy() bool {
	now := time.Now()
	if now.Sub(d.pk.lastMsg) < busyGap {
		d.pk.streak++
	} else {
		d.pk.streak = 0
	}
	d.pk.lastMsg = now
	return d.pk.streak >= busyStreak
}

// parkedEnd takes the end of stream or error relayParked read when
// nothing is left to write (pk.mu held): the parker then finishes the
// direction itself.
func (d *direction) parkedEnd() error {
	if len(d.out) > 0 {
		return nil
	}
	err := d.pk.stash
	d.pk.stash = nil
	return err
}

// parkIO is the RawConn.Control callback of relayParked (d.pk.ctl): one
// non-blocking read into d.pk.io, or a write of d.pk.io without waiting.
func (d *direction) parkIO(fd uintptr) {
	if d.pk.writing {
		// An error leaves the rest in d.pk.io: the goroutine's write
		// meets it again (passParked looks at a kept write's).
		d.pk.io, d.pk.err = writeNow(int(fd), d.pk.io)
		return
	}
	d.pk.n, d.pk.err = readNow(int(fd), d.pk.io)
}

// flushParked finishes, on the direction's goroutine, what relayParked
// left: bytes to write (waiting as long as needed), then the end of
// stream or the error it read.
func (d *direction) flushParked() error {
	if len(d.out) > 0 && d.buf != nil && d.kept != nil {
		n := len(d.out)
		d.passOnKept()
		d.putBuf()
		d.account(n)
	}
	if len(d.out) > 0 && d.buf != nil {
		n := len(d.out)
		d.op = opWrite
		err := d.dstRaw.Write(d.ioFn)
		d.putBuf()
		if err == nil {
			err = d.ioErr
		}
		if err != nil {
			return err
		}
		d.account(n)
	}
	if d.pk.reset != nil {
		d.ioErr, d.pk.reset = d.pk.reset, nil
		return d.replayElsewhere()
	}
	err := d.pk.stash
	d.pk.stash = nil
	return err
}

// readNow is one non-blocking read, retried on EINTR.
func readNow(fd int, buf []byte) (int, error) {
	for {
		n, err := rawRead(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// writeNow writes what it can without waiting; it returns the rest and
// what stopped it: EAGAIN (the rest must wait) or an error.
func writeNow(fd int, out []byte) ([]byte, error) {
	for len(out) > 0 {
		n, err := rawWrite(fd, out)
		switch err {
		case nil:
			out = out[n:]
		case unix.EINTR:
		default:
			return out, err
		}
	}
	return out, nil
}

// wake resumes a direction on a goroutine of its own: one taken out of
// the parker, or one that could not park at its start.
func (d *direction) wake() {
	d.r.goroutines.Add(1)
	if d.toBackend {
		d.rel.clientSent.Store(math.MaxInt64) // no push while the client sends on
	}
	d.armIdleCheck() // the last check's deadline has passed
	d.resume()
}

// armIdleCheck makes the next wait for data end after the idle check's
// period, so that run can see whether anything moved meanwhile.
func (d *direction) armIdleCheck() {
	d.mark = d.n
	d.src.SetReadDeadline(time.Now().Add(d.r.idleCheck))
}

// epollWaitNow and epollCtl are the parker's epoll calls. Neither waits
// (a zero timeout), so they are raw system calls: through unix.EpollWait
// and unix.EpollCtl each entered the scheduler's system call state,
// which wakes the runtime's sleeping sysmon thread (fileConn says what
// that cost).
func epollWaitNow(epfd int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func epollCtl(epfd, op int, fd int32, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// watchForReset parks a direction that read its source's end (a
// half-close, passed on as a FIN) for one more event only: the source's
// reset. The other direction may go on for long (a client that sent its
// request and half-closed, waiting for the answer); without the watch, a
// reset of the half-closed side reached nobody, and the connection stayed
// until the other side closed. A source the parker read to its end is
// still in its epoll, where a reset raises an event as well: watching it
// costs no system call (most connections end there). Any other is added
// for errors only (EPOLLERR and EPOLLHUP, which epoll always reports).
// Without a parker nothing is watched.
func (d *direction) watchForReset() {
	d.pk.mu.Lock()
	defer d.pk.mu.Unlock()
	if d.pk.parker == nil || d.pk.parked || d.rel.conn.IsClosed() {
		return
	}
	ok := false
	err := d.srcRaw.Control(func(fd uintptr) {
		if !d.pk.inEpoll {
			d.pk.srcFD = int32(fd)
		}
		ok = d.pk.parker.watch(d.pk.srcFD, d, !d.pk.inEpoll)
	})
	d.pk.parked = ok && err == nil
	d.pk.inEpoll = d.pk.parked
	d.pk.watching = d.pk.parked
}

// watch serves fd's events to d, watched for a reset (watchForReset),
// adding fd to the epoll for errors only if add; false if the kernel
// refused.
func (p *parker) watch(fd int32, d *direction, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if add {
		ev := unix.EpollEvent{Events: unix.EPOLLET, Fd: fd}
		p.calls.Add(1)
		if epollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev) != nil {
			return false
		}
	}
	p.parked[fd] = d
	return true
}

// serveWatch handles an event of a watched direction (d.pk.mu held, and
// unlocked here): an error on its source (SO_ERROR: ECONNRESET, or EPIPE
// for a reset after the peer's FIN) aborts the connection; any other
// event (the session's own shutdown of the socket) is ignored.
func (p *parker) serveWatch(d *direction, events uint32) {
	soErr := 0
	d.srcRaw.Control(func(fd uintptr) {
		soErr, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	})
	if soErr == 0 && events&unix.EPOLLERR == 0 {
		d.pk.mu.Unlock()
		return
	}
	d.pk.watching = false
	d.unparkLocked(false)
	d.pk.mu.Unlock()
	d.rel.conn.AbortSockets()
}
