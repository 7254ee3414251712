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
// locked thread, one epoll, raw non-blocking IPv4 sockets and nothing else
// (no health checks, retry, timeouts, metrics, splice or limits). Per
// connection it makes accept4, socket, connect, two epoll_ctl, the reads
// and writes, one shutdown and two closes, fewer system calls than
// HAProxy. The bench runs it to show where the floor lies: what any proxy
// pays in the kernel, plus an event loop with no bookkeeping. A baseline
// for the bench, never a product: a backend that never answers leaves its
// client waiting for ever.
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
		c, _, err := unix.Accept4(f.ln, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
			f.connect(c)
		case unix.EINTR, unix.ECONNABORTED:
		default: // EAGAIN, or out of descriptors: wait for the next event
			return
		}
	}
}

// connect pairs a client with a new connection to the next backend. Both
// are registered once, edge-triggered for reading and writing, so no
// epoll_ctl is needed again; close removes them.
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
	for _, s := range []*floorSide{cs, bs} {
		f.set(s.fd, s)
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(s.fd)}
		if err := unix.EpollCtl(f.ep, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
			f.closePair(cs)
			return
		}
	}
	// Speculative, as HAProxy does: the client's first bytes are usually
	// there already, and a loopback connect is often complete by now;
	// what cannot go yet waits for the events.
	f.pump(cs)
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
	if events&unix.EPOLLOUT != 0 && len(s.peer.pending) > 0 {
		if !f.flush(s.peer) {
			return
		}
		if f.sides[fd] != s {
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		f.pump(s)
	}
}

// pump copies from src to its peer until src has nothing more, the peer
// cannot take more, or src ended.
func (f *floorProxy) pump(src *floorSide) {
	dst := src.peer
	for !src.eof && len(src.pending) == 0 {
		n, err := unix.Read(src.fd, f.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			f.closePair(src)
			return
		case n == 0:
			src.eof = true
		default:
			w, err := unix.Write(dst.fd, f.buf[:n])
			if err == unix.EAGAIN {
				w, err = 0, nil
			}
			if err != nil {
				f.closePair(src)
				return
			}
			if w < n {
				src.pending = append([]byte(nil), f.buf[w:n]...)
			}
		}
	}
	f.finish(src)
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
	if src.eof {
		f.finish(src)
		return f.sides[src.fd] == src
	}
	f.pump(src) // edge-triggered: src may hold data we stopped reading
	return f.sides[src.fd] == src
}

// finish passes src's end of stream on once everything it sent is out,
// and closes the pair when both sides ended.
func (f *floorProxy) finish(src *floorSide) {
	if !src.eof || len(src.pending) > 0 {
		return
	}
	dst := src.peer
	if !dst.shut {
		dst.shut = true
		if dst.eof && len(dst.pending) == 0 {
			f.closePair(src) // both ended: close sends the FIN
			return
		}
		unix.Shutdown(dst.fd, unix.SHUT_WR)
	}
	if dst.eof && len(dst.pending) == 0 && src.shut {
		f.closePair(src)
	}
}

func (f *floorProxy) closePair(s *floorSide) {
	for _, x := range []*floorSide{s, s.peer} {
		if x.fd < len(f.sides) && f.sides[x.fd] == x {
			f.sides[x.fd] = nil
			unix.Close(x.fd)
		}
	}
}
