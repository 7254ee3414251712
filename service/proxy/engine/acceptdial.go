package engine

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawListener accepts with accept4 of its own (fileConn says why). Go
// does not let a listener's RawConn wait for reading, so it waits on a
// duplicate of the listening socket's descriptor, held as a file.
type rawListener struct {
	net.Listener
	file   *os.File
	raw    syscall.RawConn
	closed atomic.Bool
}

// AcceptRaw wraps a TCP listener; any other, or one whose descriptor
// cannot be duplicated, is used as it is.
func AcceptRaw(ln net.Listener) net.Listener {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln
	}
	raw, err := tl.SyscallConn()
	if err != nil {
		return ln
	}
	dup := -1
	raw.Control(func(fd uintptr) { dup, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if dup < 0 {
		return ln
	}
	// Non-blocking like the listener (the flag belongs to the socket), so
	// the file is pollable.
	l := &rawListener{Listener: ln, file: os.NewFile(uintptr(dup), "")}
	l.raw, _ = l.file.SyscallConn()
	return l
}

// Accept returns the next connection; its errors wrap the errno, as
// net's do (listen.Backoff tells the passing ones), and a closed
// listener's is net.ErrClosed.
func (l *rawListener) Accept() (net.Conn, error) {
	var a acceptOne
	if err := l.raw.Read(a.try); err != nil {
		if l.closed.Load() {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: err}
	}
	if a.err != nil {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", a.err)}
	}
	return NewFileConn(a.fd, a.sa.addrPort()), nil
}

// Close closes both descriptors; a waiting Accept returns.
func (l *rawListener) Close() error {
	l.closed.Store(true)
	l.file.Close()
	return l.Listener.Close()
}

// acceptOne is rawListener.Accept's RawConn.Read callback and its result.
type acceptOne struct {
	sa  rawSockaddrAny
	fd  int
	err error
}

func (a *acceptOne) try(lfd uintptr) bool {
	for {
		a.sa.len = unix.SizeofSockaddrInet6
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, lfd, uintptr(unsafe.Pointer(&a.sa.RawSockaddrInet6)), uintptr(unsafe.Pointer(&a.sa.len)),
			unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		switch e {
		case 0:
			a.fd, a.err = int(r), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		a.err = e
		return true
	}
}

// dialAddr connects a new non-blocking socket to addr, with opts (TCP
// options, set before the connect so that the SYN carries them), waiting
// at most timeout (0: no limit but the kernel's), in pk's epoll (nil:
// in Go's poller). Its system calls do not block, so they skip the
// scheduler's entersyscall/exitsyscall. On an error it may return the
// socket too, for the caller to close (closeBackend: the one closer).
func dialAddr(addr netip.AddrPort, opts []SockOpt, timeout time.Duration, pk *parker) (*FileConn, error) {
	sa, family := rawSockaddr(addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, dialError(addr, "socket", err)
	}
	c := NewFileConn(fd, addr)
	for _, o := range opts {
		if err := rawSetsockoptInt(fd, o); err != nil {
			return c, &SetupError{Err: dialError(addr, "setsockopt", err)}
		}
	}
	err = rawConnect(fd, &sa)
	if err != nil && err != unix.EINPROGRESS && err != unix.EINTR {
		return c, dialError(addr, "connect", err)
	}
	if err == nil {
		return c, nil
	}
	if err := c.awaitConnect(&sa, timeout, pk); err != nil {
		return c, dialError(addr, "connect", err)
	}
	return c, nil
}

// Dial connects to addr as dialAddr does, waiting in one of the
// engine's parkers.
func (r *Engine) Dial(addr netip.AddrPort, opts []SockOpt, timeout time.Duration) (*FileConn, error) {
	return dialAddr(addr, opts, timeout, r.pickParker())
}

// SockOpt is one integer socket option and its value.
type SockOpt struct{ Level, Name, Value int }

// SetupError is a failure to set up our own socket (an option the kernel
// refused): not the backend's fault, and no other backend would fare
// better.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// awaitConnect waits until the connect in progress ends, in pk's epoll or
// else in Go's poller (promote). A second connect tells how it ended in
// one system call (Linux: EALREADY while in progress, 0 once connected,
// else the error), and is tried first, since the connection may have been
// made meanwhile (on loopback it always is).
func (c *FileConn) awaitConnect(sa *rawSockaddrAny, timeout time.Duration, pk *parker) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	w := connectWait{sa: sa}
	// The dialing goroutine owns c alone: nothing can close fd meanwhile.
	if w.check(uintptr(c.fd)) {
		return w.err
	}
	if pk != nil {
		if watched, err := pk.waitConnect(int32(c.fd), &w, deadline); watched {
			return err
		}
	}
	// In Go's poller, the socket promoted for the wait. Demoted after: its
	// reader starts parked, so it would keep the duplicate for the
	// connection's life.
	c.SetWriteDeadline(deadline)
	err := c.rawConn().Write(w.check)
	c.SetWriteDeadline(time.Time{})
	c.demote()
	if err != nil {
		return err
	}
	return w.err
}

// connectWait is awaitConnect's RawConn.Write callback and its result.
type connectWait struct {
	sa  *rawSockaddrAny
	err error
}

func (w *connectWait) check(fd uintptr) bool {
	switch err := rawConnect(int(fd), w.sa); err {
	case unix.EALREADY, unix.EINPROGRESS, unix.EINTR:
		return false
	case nil, unix.EISCONN:
		return true
	default:
		w.err = err
		return true
	}
}

func dialError(addr netip.AddrPort, call string, err error) error {
	return fmt.Errorf("dial %s: %w", addr, os.NewSyscallError(call, err))
}

// rawSockaddrAny holds an IPv4 or IPv6 socket address as the kernel
// reads and writes it.
type rawSockaddrAny struct {
	unix.RawSockaddrInet6 // the larger of the two; an IPv4 one overlays its start
	len                   uint32
}

// addrPort converts the address the kernel wrote (IPv4-mapped to IPv4).
func (sa *rawSockaddrAny) addrPort() netip.AddrPort {
	if sa.Family == unix.AF_INET {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa.RawSockaddrInet6))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), getPort(&sa4.Port))
	}
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), getPort(&sa.Port))
}

// rawSockaddr builds the kernel's form of addr (an IPv4-mapped IPv6
// address is dialed as IPv4, as net does).
func rawSockaddr(addr netip.AddrPort) (rawSockaddrAny, int) {
	var sa rawSockaddrAny
	ip, port := addr.Addr().Unmap(), addr.Port()
	if ip.Is4() {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa.RawSockaddrInet6))
		sa4.Family = unix.AF_INET
		sa4.Addr = ip.As4()
		putPort(&sa4.Port, port)
		sa.len = unix.SizeofSockaddrInet4
		return sa, unix.AF_INET
	}
	sa.Family = unix.AF_INET6
	sa.Addr = ip.As16()
	putPort(&sa.Port, port)
	sa.len = unix.SizeofSockaddrInet6
	return sa, unix.AF_INET6
}

// putPort and getPort store and read a port in network byte order.
func putPort(dst *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

func getPort(src *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(src))
	return uint16(b[0])<<8 | uint16(b[1])
}

func rawConnect(fd int, sa *rawSockaddrAny) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.RawSockaddrInet6)), uintptr(sa.len))
	if e != 0 {
		return e
	}
	return nil
}

func rawSetsockoptInt(fd int, o SockOpt) error {
	v := int32(o.Value)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(o.Level), uintptr(o.Name), uintptr(unsafe.Pointer(&v)), 4, 0)
	if e != 0 {
		return e
	}
	return nil
}
