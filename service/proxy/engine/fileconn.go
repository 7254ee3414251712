package engine

import (
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket is what a session needs of each of its two sockets: a
// *FileConn, or for a backend dialed by name a *net.TCPConn.
type Socket interface {
	Write(p []byte) (int, error)
	Close() error
	CloseWrite() error
	SetReadDeadline(t time.Time) error
	SyscallConn() (syscall.RawConn, error)
	LocalAddr() net.Addr  // for debug lines
	RemoteAddr() net.Addr // for debug lines
}

// FileConn is a TCP socket the proxy accepted (rawListener) or dialed
// (dialAddr) with system calls of its own. Go's net package spent a third
// of a connection's user time on what the proxy does not need (a context
// and a timer per dial, address parsing and lookup, its own bookkeeping)
// and asked the kernel for addresses that only debug lines use
// (getsockname on accept and dial, getpeername on dial), and its accept
// set TCP_NODELAY that the socket already had from the listener
// (acceptFixer).
//
// The descriptor is its own, outside Go's poller: most connections never
// have a goroutine wait on their sockets (the parker passes their
// messages and their end on), and a socket in the poller cost two
// epoll_ctl calls and a close through the scheduler's system call state,
// which woke the runtime's sysmon thread from its sleep for a millisecond
// of 20 µs polls. Without both: a fifth less CPU a connection, a quarter
// of the context switches (measured on 2026-12-03). Only when a
// goroutine must wait on the socket (bulk, a write that waits; a connect
// in progress waits in a parker's epoll, parker.waitConnect) does a
// duplicate go to Go's poller (promote), until the direction that reads
// it parks again (demote). References (fdRefs) keep
// the number from being closed, and reused, while a call uses it; the
// last one to let go closes it. Close must be called: no finalizer closes
// a forgotten fileConn.
type FileConn struct {
	fd   int
	refs fdRefs
	peer netip.AddrPort

	mu      Mutex[fileLock]
	closing bool            // Close was called: no more promotion
	waiter  *os.File        // the duplicate in Go's poller while promoted
	waitRaw syscall.RawConn // waiter's
	waiting int             // goroutines in a wait on waiter: demote waits for none
	rd, wd  time.Time       // deadlines, for the waiter when it comes
}

// NewFileConn makes a FileConn of a connected socket fd, non-blocking
// and close-on-exec, whose peer is peer (zero if unknown).
func NewFileConn(fd int, peer netip.AddrPort) *FileConn {
	c := &FileConn{fd: fd, peer: peer}
	c.refs.init()
	return c
}

// Read reads what is there, waiting for it as long as needed; a reset
// is an error (ECONNRESET), only the peer's FIN is io.EOF.
func (c *FileConn) Read(p []byte) (n int, err error) {
	var rerr error
	err = c.rawConn().Read(func(fd uintptr) bool {
		n, rerr = readNow(int(fd), p)
		return rerr != unix.EAGAIN
	})
	if err == nil && rerr != nil {
		err = os.NewSyscallError("read", rerr)
	}
	if err == nil && n == 0 && len(p) > 0 {
		err = io.EOF
	}
	return max(n, 0), err
}

// Write writes all of p, waiting as long as needed.
func (c *FileConn) Write(p []byte) (int, error) {
	out, werr := p, error(nil)
	err := c.rawConn().Write(func(fd uintptr) bool {
		out, werr = writeNow(int(fd), out)
		return werr != unix.EAGAIN
	})
	if err == nil && werr != nil {
		err = os.NewSyscallError("write", werr)
	}
	return len(p) - len(out), err
}

func (c *FileConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }

func (c *FileConn) SyscallConn() (syscall.RawConn, error) { return (*fileRaw)(c), nil }

// rawConn is SyscallConn without the error it never returns.
func (c *FileConn) rawConn() *fileRaw { return (*fileRaw)(c) }

// RawConn is the socket's RawConn, as SyscallConn's.
func (c *FileConn) RawConn() syscall.RawConn { return (*fileRaw)(c) }

// Peer is the address the socket is connected to.
func (c *FileConn) Peer() netip.AddrPort { return c.peer }

// Close closes the socket once no call uses it any more; a goroutine
// waiting on it returns at once.
func (c *FileConn) Close() error {
	if !c.refs.markClosed() {
		return os.ErrClosed
	}
	c.mu.Lock()
	c.closing = true
	w := c.waiter
	c.mu.Unlock()
	if w != nil {
		w.Close()
	}
	c.release()
	return nil
}

// release drops one reference; the last one closes the descriptor, with
// a raw system call (a TCP close without SO_LINGER does not block).
func (c *FileConn) release() {
	if c.refs.decref() {
		unix.RawSyscall(unix.SYS_CLOSE, uintptr(c.fd), 0, 0)
	}
}

func (c *FileConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *FileConn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(&c.rd, (*os.File).SetReadDeadline, t)
}

func (c *FileConn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(&c.wd, (*os.File).SetWriteDeadline, t)
}

// setDeadline keeps deadline t (rd or wd) for a waiter to come, and sets
// it on the one in Go's poller now.
func (c *FileConn) setDeadline(keep *time.Time, set func(*os.File, time.Time) error, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*keep = t
	if c.waiter != nil {
		return set(c.waiter, t)
	}
	return nil
}

// promote hands a duplicate of the socket to Go's poller, the first time
// a goroutine must wait on it (again after demote), and returns the
// duplicate's RawConn, counted as waited on until leaveWaiter. A
// duplicate that cannot be had (EMFILE) is our shortage, not the peer's
// (balance.LocalFault tells it).
func (c *FileConn) promote() (syscall.RawConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return nil, os.ErrClosed
	}
	if c.waiter != nil {
		c.waiting++
		return c.waitRaw, nil
	}
	dup, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("dup", err)
	}
	// Non-blocking like c.fd (the flag belongs to the socket), so
	// os.NewFile hands it to the poller.
	w := os.NewFile(uintptr(dup), "")
	raw, err := w.SyscallConn()
	if err != nil {
		w.Close()
		return nil, err
	}
	w.SetReadDeadline(c.rd)
	w.SetWriteDeadline(c.wd)
	c.waiter, c.waitRaw = w, raw
	c.waiting++
	return raw, nil
}

// joinWaiter returns the duplicate's RawConn, counted as waited on until
// leaveWaiter; nil if the socket is not promoted.
func (c *FileConn) joinWaiter() syscall.RawConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waitRaw != nil {
		c.waiting++
	}
	return c.waitRaw
}

func (c *FileConn) leaveWaiter() {
	c.mu.Lock()
	c.waiting--
	c.mu.Unlock()
}

// demote closes the duplicate if no goroutine waits on it: the direction
// that reads the socket parked again, and the connection goes back to
// its two descriptors. A connection that once carried bulk (a LIST) and
// then idles (its watch) would otherwise hold four, and the descriptors
// kept apart for them (DerivedMaxConnections) would run out.
func (c *FileConn) demote() {
	c.mu.Lock()
	w := c.waiter
	if w == nil || c.waiting > 0 {
		c.mu.Unlock()
		return
	}
	c.waiter, c.waitRaw = nil, nil
	c.mu.Unlock()
	w.Close()
}

// demote demotes c if it is a fileConn (a backend dialed by name is
// net's).
func demote(c Socket) {
	if fc, ok := c.(*FileConn); ok {
		fc.demote()
	}
}

// promoted reports whether a duplicate is in Go's poller (tests).
func (c *FileConn) promoted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiter != nil
}

// fileRaw is a fileConn's syscall.RawConn: its callbacks get the
// descriptor while a reference holds it open. Read and Write call theirs
// at once, and wait in Go's poller (promote) only if it asks to.
type fileRaw FileConn

func (r *fileRaw) Control(fn func(fd uintptr)) error {
	c := (*FileConn)(r)
	if !c.refs.incref() {
		return os.ErrClosed
	}
	fn(uintptr(c.fd))
	c.release()
	return nil
}

func (r *fileRaw) Read(fn func(fd uintptr) bool) error {
	return (*FileConn)(r).await(fn, true)
}

func (r *fileRaw) Write(fn func(fd uintptr) bool) error {
	return (*FileConn)(r).await(fn, false)
}

// await calls fn until it reports done, waiting for readability (read)
// or writability in between. A socket already promoted waits in the
// poller from the start, as os.File would, deadline included.
func (c *FileConn) await(fn func(fd uintptr) bool, read bool) error {
	if !c.refs.incref() {
		return os.ErrClosed
	}
	defer c.release()
	w := c.joinWaiter()
	if w == nil {
		if fn(uintptr(c.fd)) {
			return nil
		}
		var err error
		if w, err = c.promote(); err != nil {
			return err
		}
		// The poller calls fn again before it waits: an empty read or
		// write, once a promotion. Skipping that call lost wake-ups: the
		// readiness epoll reports when the duplicate is added can be
		// taken by another thread's netpoll before RawRead's prepare
		// clears it, and an edge-triggered socket that is ready already
		// raises no new one (dials timed out in the VM scenarios).
	}
	defer c.leaveWaiter()
	if read {
		return w.Read(fn)
	}
	return w.Write(fn)
}

// CloseWrite sends the FIN while the other direction goes on.
func (c *FileConn) CloseWrite() error {
	var errno syscall.Errno
	if err := c.rawConn().Control(func(fd uintptr) {
		_, _, errno = unix.RawSyscall(unix.SYS_SHUTDOWN, fd, unix.SHUT_WR, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("shutdown", errno)
	}
	return nil
}

// LocalAddr is the socket's own address; it costs a system call.
func (c *FileConn) LocalAddr() net.Addr {
	var sa rawSockaddrAny
	c.rawConn().Control(func(fd uintptr) {
		sa.len = unix.SizeofSockaddrInet6
		unix.RawSyscall(unix.SYS_GETSOCKNAME, fd, uintptr(unsafe.Pointer(&sa.RawSockaddrInet6)), uintptr(unsafe.Pointer(&sa.len)))
	})
	return net.TCPAddrFromAddrPort(sa.addrPort())
}
