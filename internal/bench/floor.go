package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

// runFloor is the least a user-space TCP proxy can do per connection: one
// locked thread, one level-triggered epoll, raw non-blocking IPv4 sockets
// and nothing else (no health checks, retry, timeouts, metrics, splice or
// limits). Per connection it makes accept4, socket, one setsockopt,
// connect, three epoll_ctl, the reads and writes, one shutdown and two
// closes: fewer system calls than HAProxy. The bench runs it to show where
// the floor lies: what any proxy pays in the kernel, plus an event loop
// with no bookkeeping. A baseline for the bench, never a product: a
// backend that never answers leaves its client waiting for ever.
func runFloor(ctx context.Context, listen string, backends []string) error {
	if len(backends) == 0 {
		return errors.New("floor proxy: no backends")
	}
	f := &floorProxy{buf: make([]byte, 64<<10)}
	for _, b := range backends {
		sa, err := inet4(b)
		if err != nil {
			return fmt.Errorf("floor proxy backend: %w", err)
		}
		f.backends = append(f.backends, sa)
	}
	runtime.LockOSThread() // epoll_wait blocks this thread, not the scheduler
	defer runtime.UnlockOSThread()
	if err := f.open(listen); err != nil {
		f.closeAll()
		return err
	}
	defer f.closeAll()
	stop := context.AfterFunc(ctx, func() {
		unix.Write(f.wake, []byte{0, 0, 0, 0, 0, 0, 0, 1})
	})
	defer stop()
	return f.loop()
}

func inet4(addr string) (*unix.SockaddrInet4, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("%q is not an IPv4 address:port", addr)
	}
	return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}, nil
}

type floorProxy struct {
	ln, ep, wake int
	backends     []*unix.SockaddrInet4
	next         int
	sides        []*floorSide // by descriptor
	buf          []byte       // the one read buffer: the loop is single-threaded
}

// floorSide is one socket of a proxied pair.
type floorSide struct {
	fd      int
	peer    *floorSide
	pending []byte // read from this side, not yet written to the peer
	eof     bool   // this side sent its FIN
	shut    bool   // we sent our FIN to this side
	events  uint32 // what it is registered for; 0: not in the epoll
}

// done reports that everything this side sent reached its peer, FIN
// included once passed on.
func (s *floorSide) done() bool { return s.eof && len(s.pending) == 0 }

// want is what the side must be woken for: reading while it may send and
// its last bytes went out, writing while its peer's bytes wait.
func (s *floorSide) want() uint32 {
	var ev uint32
	if !s.eof && len(s.pending) == 0 {
		ev |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if len(s.peer.pending) > 0 {
		ev |= unix.EPOLLOUT
	}
	return ev
}

func (f *floorProxy) open(listen string) (err error) {
	f.ln, f.ep, f.wake = -1, -1, -1
	sa, err := inet4(listen)
	if err != nil {
		return fmt.Errorf("floor proxy listen: %w", err)
	}
	if f.ln, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return fmt.Errorf("floor proxy socket: %w", err)
	}
	unix.SetsockoptInt(f.ln, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	unix.SetsockoptInt(f.ln, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // accepted sockets inherit it
	if err := unix.Bind(f.ln, sa); err != nil {
		return fmt.Errorf("floor proxy bind %s: %w", listen, err)
	}
	if err := unix.Listen(f.ln, 4096); err != nil {
		return fmt.Errorf("floor proxy listen %s: %w", listen, err)
	}
	if f.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("floor proxy epoll: %w", err)
	}
	if f.wake, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("floor proxy eventfd: %w", err)
	}
	for _, fd := range []int{f.ln, f.wake} {
		if err := unix.EpollCtl(f.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fmt.Errorf("floor proxy epoll add: %w", err)
		}
	}
	return nil
}

func (f *floorProxy) closeAll() {
	for _, s := range f.sides {
		if s != nil {
			unix.Close(s.fd)
		}
	}
	for _, fd := range []int{f.ln, f.ep, f.wake} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// loop waits for events until the wake descriptor fires.
func (f *floorProxy) loop() error {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(f.ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("floor proxy epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			switch fd := int(ev.Fd); fd {
			case f.wake:
				return nil
			case f.ln:
				f.acceptAll()
			default:
				f.ready(fd, ev.Events)
			}
		}
	}
}

func (f *floorProxy) acceptAll() {
	for {
		// Raw, without the peer's address: x/sys/unix would also ask the
		// listener for its protocol on every accept.
		c, _, errno := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(f.ln), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		switch errno {
		case 0:
			f.connect(int(c))
		case unix.EINTR, unix.ECONNABORTED:
		default: // EAGAIN, or out of descriptors: wait for the next event
			return
		}
	}
}

// connect pairs a client with a new connection to the next backend.
// Level-triggered, as HAProxy: a short read means the socket is drained,
// so no read ends in EAGAIN, and the epoll says when more comes.
func (f *floorProxy) connect(client int) {
	f.next++
	b, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(client)
		return
	}
	unix.SetsockoptInt(b, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(b, f.backends[f.next%len(f.backends)]); err != nil && err != unix.EINPROGRESS {
		unix.Close(b)
		unix.Close(client)
		return
	}
	cs, bs := &floorSide{fd: client}, &floorSide{fd: b}
	cs.peer, bs.peer = bs, cs
	f.set(client, cs)
	f.set(b, bs)
	// Speculative, as HAProxy does: the client's first bytes are usually
	// there already, and a loopback connect is often complete by now;
	// what cannot go yet waits for the events.
	if f.pump(cs) {
		f.settle(cs)
	}
}

func (f *floorProxy) set(fd int, s *floorSide) {
	for fd >= len(f.sides) {
		f.sides = append(f.sides, nil)
	}
	f.sides[fd] = s
}

// ready handles an event on one side: writable flushes what its peer
// read, readable pumps from it.
func (f *floorProxy) ready(fd int, events uint32) {
	if fd >= len(f.sides) || f.sides[fd] == nil {
		return // closed earlier in this batch
	}
	s := f.sides[fd]
	if events&unix.EPOLLOUT != 0 && !f.flush(s.peer) {
		return
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !f.pump(s) {
		return
	}
	f.settle(s)
}

// pump copies from src to its peer until a short read (drained), the
// peer cannot take more, or src ended; false if the pair was closed.
func (f *floorProxy) pump(src *floorSide) bool {
	for !src.eof && len(src.pending) == 0 {
		n, err := unix.Read(src.fd, f.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			f.closePair(src)
			return false
		case n == 0:
			src.eof = true
			return true
		}
		w, err := unix.Write(src.peer.fd, f.buf[:n])
		if err == unix.EAGAIN {
			w, err = 0, nil
		}
		if err != nil {
			f.closePair(src)
			return false
		}
		if w < n {
			src.pending = append([]byte(nil), f.buf[w:n]...)
		}
		if n < len(f.buf) {
			return true
		}
	}
	return true
}

// flush writes what src read to its peer; false if the pair was closed.
func (f *floorProxy) flush(src *floorSide) bool {
	for len(src.pending) > 0 {
		w, err := unix.Write(src.peer.fd, src.pending)
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return true
		case err != nil:
			f.closePair(src)
			return false
		default:
			src.pending = src.pending[w:]
		}
	}
	src.pending = nil
	return true
}

// settle passes an end of stream on once everything before it is out,
// closes the pair when both ends are done, and otherwise registers both
// sides for what they now wait for.
func (f *floorProxy) settle(s *floorSide) {
	if s.done() && s.peer.done() {
		f.closePair(s) // close sends the FINs not sent yet
		return
	}
	for _, x := range []*floorSide{s, s.peer} {
		if x.done() && !x.peer.shut {
			x.peer.shut = true
			unix.Shutdown(x.peer.fd, unix.SHUT_WR)
		}
	}
	for _, x := range []*floorSide{s, s.peer} {
		if !f.register(x) {
			f.closePair(s)
			return
		}
	}
}

// register brings x's registration in line with what it waits for. A
// side that waits for nothing leaves the epoll: level-triggered, a socket
// whose peer hung up would otherwise wake the loop again and again.
func (f *floorProxy) register(x *floorSide) bool {
	want := x.want()
	if want == x.events {
		return true
	}
	op := unix.EPOLL_CTL_MOD
	switch {
	case x.events == 0:
		op = unix.EPOLL_CTL_ADD
	case want == 0:
		op = unix.EPOLL_CTL_DEL
	}
	x.events = want
	return unix.EpollCtl(f.ep, op, x.fd, &unix.EpollEvent{Events: want, Fd: int32(x.fd)}) == nil
}

func (f *floorProxy) closePair(s *floorSide) {
	for _, x := range []*floorSide{s, s.peer} {
		if x.fd < len(f.sides) && f.sides[x.fd] == x {
			f.sides[x.fd] = nil
			unix.Close(x.fd)
		}
	}
}
