package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
// once (1,861 to 906, stacks 10 to 6 MB, peak RSS 40 to 34 MB). A
// direction that wakes from the parker costs two epoll_ctl calls and a
// goroutine start.
const parkAfter = 50 * time.Millisecond

// errParked ends a direction's goroutine while the direction lives on,
// parked: the parker resumes it on a fresh goroutine when data arrives.
var errParked = errors.New("direction parked")

// parker holds idle directions without a goroutine each: an idle
// connection costs two sockets and a little heap, not two goroutine
// stacks. A parked direction's source socket sits in a private epoll
// (parkEvents); that epoll's own descriptor is waited on through Go's
// poller, so no thread blocks on it, and one goroutine serves every
// parked direction.
//
// Closing a socket silently takes it out of an epoll, so a socket some
// direction reads is closed through closeConn (session.go), which first
// stops that direction's parking: it goes back to Go's poller, which does
// see the close.
type parker struct {
	epfd int
	file *os.File // owns epfd

	mu     sync.Mutex
	parked map[int32]*direction // by source socket descriptor
	closed bool                 // epfd is closed: its number may be reused

	buf []byte // the loop's own, for messages relayed in place (serve)
	// relayed counts the messages passed on in place, without waking
	// their direction (tests).
	relayed atomic.Uint64
	// calls counts the parker's epoll_wait and epoll_ctl calls (tests).
	calls atomic.Uint64
}

// parkEvents is how a parked socket is watched: edge-triggered, so that
// a message relayed in place needs no re-arm (an epoll_ctl per message
// with a one-shot entry: 6 % of the proxy's CPU in the at-once storm's
// profile). Edge-triggered is enough because the parker keeps a socket
// only after a read that drained it (shorter than its buffer, or EAGAIN),
// and each later arrival raises a new event; whatever else it read
// (the end of the stream, bulk, a write that must wait) takes the socket
// out of the epoll.
const parkEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET

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
	p := &parker{epfd: epfd, file: f, parked: make(map[int32]*direction), buf: make([]byte, copyBufSize)}
	go p.loop(raw)
	return p, nil
}

func (p *parker) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.file.Close()
}

// loop serves parked directions whose socket turned readable (data, end
// of stream or an error). It serves them inside the callback of one
// RawConn.Read that never returns true: a new event always reaches Go's
// poller (the inner epoll wakes its waiters on every one), and a readiness
// already reported stays pending there between rounds, so a round costs
// one epoll_wait of ours. A fresh RawConn.Read per round forgets that
// readiness and needed a second, empty epoll_wait before each wait.
func (p *parker) loop(raw syscall.RawConn) {
	events := make([]unix.EpollEvent, 128)
	ready := make([]readied, 0, len(events))
	raw.Read(func(fd uintptr) bool {
		for {
			n, err := unix.EpollWait(int(fd), events, 0)
			p.calls.Add(1)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 {
				return false // nothing ready: wait in Go's poller
			}
			p.mu.Lock()
			for _, ev := range events[:n] {
				if d := p.parked[ev.Fd]; d != nil {
					ready = append(ready, readied{d, ev.Events})
				}
			}
			p.mu.Unlock()
			for i, r := range ready {
				p.serve(r.d, r.events)
				ready[i] = readied{}
			}
			ready = ready[:0]
			if n < len(events) {
				return false // drained when we looked
			}
		}
	})
	// Read returned: the parker's epoll was closed.
}

// readied is a parked direction with the events epoll reported for it.
type readied struct {
	d      *direction
	events uint32
}

// endEvents say the peer's FIN (or a reset, an error) is in: more than
// a read may take. Edge-triggered, that end raises no new event once it
// came with the data, so a read that passes the data on must not leave
// the direction parked: its goroutine reads to the end.
const endEvents = unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR

// serve handles a parked direction whose source turned readable. A small
// message on a bound session (a watch event, a lease renewal: most of a
// control plane's traffic) is passed on right here and the direction
// stays parked: a read and a write, as an event loop does. Waking it
// instead cost an epoll_ctl out of the parker, a goroutine, Go's poller
// and a timer, and an epoll_ctl back one to two parkAfter periods later,
// for every message (in the storm bench's profile, half of the proxy's
// CPU with 2,000 watches getting an event every 2 s). The end of the
// stream, an error, a write that would wait or a read that fills the
// buffer (bulk) resume the direction on a goroutine of its own.
func (p *parker) serve(d *direction, events uint32) {
	d.pk.mu.Lock()
	if !d.pk.parked {
		d.pk.mu.Unlock()
		return // unparked meanwhile (stopParking)
	}
	if events&endEvents == 0 && d.relayable() && d.relayParked(p.buf) {
		p.relayed.Add(1)
		d.pk.mu.Unlock()
		return
	}
	resume := d.unparkLocked()
	d.pk.mu.Unlock()
	if resume {
		go d.wake()
	}
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
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
		delete(p.parked, fd)
		return false
	}
	return true
}

// remove stops watching fd for d.
func (p *parker) remove(fd int32, d *direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parked[fd] == d {
		delete(p.parked, fd)
	}
	if !p.closed {
		p.calls.Add(1)
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
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
	mu      sync.Mutex
	parked  bool   // in the parker, no goroutine
	parks   uint32 // times parked or relayed in place: a drain tells idle from busy (session.IdleMark)
	closing bool   // the source socket is being closed: do not park
	srcFD   int32  // the source descriptor while parked
	stash   error  // end of stream or error the parker read (flushParked)

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
	if d.pk.closing || d.r.parker == nil {
		return false
	}
	// Control holds the descriptor open: it cannot be closed (and its
	// number reused) while it goes into the epoll.
	ok := false
	err := d.srcRaw.Control(func(fd uintptr) {
		d.pk.srcFD = int32(fd)
		ok = d.r.parker.add(d.pk.srcFD, d)
	})
	d.pk.parked = ok && err == nil
	if d.pk.parked {
		d.pk.parks++
	}
	return d.pk.parked
}

// unparkLocked takes the direction out of the parker (d.pk.mu held); true
// if it was parked, and the caller must then resume it.
func (d *direction) unparkLocked() bool {
	if !d.pk.parked {
		return false
	}
	d.pk.parked = false
	d.r.parker.remove(d.pk.srcFD, d)
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
	resume := d.unparkLocked()
	d.pk.mu.Unlock()
	if resume {
		go d.wake()
	}
}

// allowParking is called when the direction has a new source socket.
func (d *direction) allowParking() {
	d.pk.mu.Lock()
	d.pk.closing = false
	d.pk.mu.Unlock()
}

// relayable says the parker may pass the direction's next message on
// (under pk.mu): no client bytes to keep for a replay. The
// client→backend direction learns that the backend answered at its next
// message (relayOnce), which may come to the parker: it binds here then.
// The backend→client direction may still wait for the backend's first
// answer (a TLS handshake slowed by a storm): relayParked marks it.
func (d *direction) relayable() bool {
	if d.sessWrite != nil && d.sessWrite.answered.Load() && d.bindBackend() != nil {
		return false
	}
	return d.sessWrite == nil
}

// relayParked passes on, under pk.mu and without waiting, what the
// parked direction's source holds; true if it did all of it and the
// direction may stay parked. Otherwise the bytes it could not write wait
// in d.out, and an end of stream or error it read in d.pk.stash, for the
// direction's goroutine (flushParked).
func (d *direction) relayParked(buf []byte) bool {
	if d.pk.ctl == nil {
		d.pk.ctl = d.parkIO
	}
	d.pk.writing, d.pk.io = false, buf
	err := d.srcRaw.Control(d.pk.ctl)
	n, rerr := d.pk.n, d.pk.err
	d.pk.io, d.pk.err = nil, nil
	if err != nil {
		return false // closed under us: the goroutine sees it
	}
	switch {
	case rerr == unix.EAGAIN:
		return true // nothing after all
	case d.sessRead != nil && (rerr != nil || n == 0):
		// Closed before answering: the goroutine reads the end of stream
		// again and replays elsewhere (after a reset, reads return EOF).
		return false
	case rerr != nil:
		d.pk.stash = rerr
		return false
	case n == 0:
		d.pk.stash = io.EOF
		return false
	}
	if d.sessRead != nil {
		d.sessRead.markAnswered()
		d.sessRead = nil
	}
	d.pk.writing, d.pk.io = true, buf[:n]
	err = d.dstRaw.Control(d.pk.ctl)
	out := d.pk.io
	d.pk.io = nil
	d.account(n - len(out))
	d.pk.parks++ // bytes moved: a drain must not take the connection for idle
	if n == len(buf) {
		d.useSplice = true // bulk: the goroutine splices the rest
	}
	if len(out) > 0 {
		d.buf = d.r.bufs.Get().(*[]byte)
		d.out = (*d.buf)[:copy(*d.buf, out)]
	}
	return err == nil && len(out) == 0 && n < len(buf)
}

// parkIO is the RawConn.Control callback of relayParked (d.pk.ctl): one
// non-blocking read into d.pk.io, or a write of d.pk.io without waiting.
func (d *direction) parkIO(fd uintptr) {
	if d.pk.writing {
		d.pk.io = writeNow(int(fd), d.pk.io)
		return
	}
	d.pk.n, d.pk.err = readNow(int(fd), d.pk.io)
}

// flushParked finishes, on the direction's goroutine, what relayParked
// left: bytes to write (waiting as long as needed), then the end of
// stream or the error it read.
func (d *direction) flushParked() error {
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

// writeNow writes what it can without waiting and returns the rest.
func writeNow(fd int, out []byte) []byte {
	for len(out) > 0 {
		n, err := rawWrite(fd, out)
		switch err {
		case nil:
			out = out[n:]
		case unix.EINTR:
		default:
			return out // EAGAIN, or an error the goroutine's write meets again
		}
	}
	return out
}

// wake resumes a direction taken out of the parker.
func (d *direction) wake() {
	d.armIdleCheck() // the last check's deadline has passed
	d.resume()
}

// armIdleCheck makes the next wait for data end after the idle check's
// period, so that run can see whether anything moved meanwhile.
func (d *direction) armIdleCheck() {
	d.mark = d.n
	d.src.SetReadDeadline(time.Now().Add(d.r.idleCheck))
}
