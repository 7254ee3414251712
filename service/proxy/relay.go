package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

const (
	// copyBufSize is the buffer a direction borrows while small messages
	// flow. A read that fills it switches the direction to splice.
	copyBufSize = 16 << 10
	// maxSpliceChunk bounds one splice; a default pipe holds 64 KiB.
	maxSpliceChunk = 1 << 20
)

// relayer moves bytes between sockets. It owns the pools shared by all
// connections: buffers for small messages and pipes for bulk transfers.
// A connection borrows from them only while data is flowing: an idle
// connection holds two sockets and two parked goroutines, nothing else.
type relayer struct {
	bufs  sync.Pool
	pipes *pipePool
}

func newRelayer() *relayer {
	r := &relayer{pipes: newPipePool(256)}
	r.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	return r
}

// relay copies client→backend and backend→client until both directions
// end, passing half-closes through, then closes both sockets. It returns
// the bytes sent each way.
func (r *relayer) relay(client, backend *net.TCPConn, toBackend, toClient prometheus.Counter) (up, down int64) {
	done := make(chan int64, 1)
	go func() { done <- r.pump(backend, client, toBackend, client) }()
	down = r.pump(client, backend, toClient, backend)
	up = <-done
	client.Close()
	backend.Close()
	return up, down
}

// pump runs one direction. On a clean end of stream it half-closes dst so
// the peer sees EOF while the other direction goes on; on an error it
// closes both sockets so the other direction ends too.
func (r *relayer) pump(dst, src *net.TCPConn, count prometheus.Counter, other *net.TCPConn) int64 {
	d, err := newDirection(r, dst, src, count)
	if err == nil {
		err = d.run()
	}
	if err == io.EOF {
		dst.CloseWrite()
		return d.n
	}
	src.Close()
	dst.Close()
	return d.n
}

// direction is the state of one copy loop. Its callbacks are bound once,
// so the loop itself allocates nothing.
type direction struct {
	r          *relayer
	dst, src   *net.TCPConn
	srcRaw     syscall.RawConn
	dstRaw     syscall.RawConn
	count      prometheus.Counter
	useSplice  bool
	n          int64
	buf        *[]byte
	pipe       pipe
	hasPipe    bool
	got        int   // bytes moved by the last read or splice-in
	ioErr      error // error of the last read, splice-in or splice-out
	pending    int   // bytes waiting in the pipe
	readFn     func(uintptr) bool
	spliceInFn func(uintptr) bool
	spliceOut  func(uintptr) bool
}

func newDirection(r *relayer, dst, src *net.TCPConn, count prometheus.Counter) (*direction, error) {
	srcRaw, err := src.SyscallConn()
	if err != nil {
		return nil, err
	}
	dstRaw, err := dst.SyscallConn()
	if err != nil {
		return nil, err
	}
	d := &direction{r: r, dst: dst, src: src, srcRaw: srcRaw, dstRaw: dstRaw, count: count}
	d.readFn = d.readOnce
	d.spliceInFn = d.spliceInOnce
	d.spliceOut = d.spliceOutOnce
	return d, nil
}

// run copies until end of stream (io.EOF) or an error.
func (d *direction) run() error {
	for {
		var err error
		if d.useSplice {
			err = d.spliceStep()
		} else {
			err = d.copyStep()
		}
		if err != nil {
			return err
		}
	}
}

// copyStep waits for data without holding a buffer, then moves one
// buffer's worth with read and write.
func (d *direction) copyStep() error {
	if err := d.srcRaw.Read(d.readFn); err != nil {
		return err
	}
	buf := d.buf
	d.buf = nil
	defer d.r.bufs.Put(buf)
	if d.ioErr != nil {
		return d.ioErr
	}
	if d.got == 0 {
		return io.EOF
	}
	if _, err := d.dst.Write((*buf)[:d.got]); err != nil {
		return err
	}
	d.account(d.got)
	if d.got == len(*buf) {
		d.useSplice = true // bulk: let the kernel move the rest
	}
	return nil
}

// readOnce is the RawConn.Read callback: it borrows a buffer only for the
// read itself and gives it back before waiting.
func (d *direction) readOnce(fd uintptr) bool {
	if d.buf == nil {
		d.buf = d.r.bufs.Get().(*[]byte)
	}
	for {
		n, err := unix.Read(int(fd), *d.buf)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			d.r.bufs.Put(d.buf)
			d.buf = nil
			return false
		}
		d.got, d.ioErr = max(n, 0), err
		return true
	}
}

// spliceStep waits for data without holding a pipe, splices what is
// there into a borrowed pipe and from the pipe into dst.
func (d *direction) spliceStep() error {
	if err := d.srcRaw.Read(d.spliceInFn); err != nil {
		d.returnPipe()
		return err
	}
	if d.ioErr != nil {
		d.returnPipe()
		if errors.Is(d.ioErr, unix.EMFILE) || errors.Is(d.ioErr, unix.ENFILE) {
			d.useSplice, d.ioErr = false, nil // no pipe to be had: copy instead
			return nil
		}
		return d.ioErr
	}
	if d.got == 0 {
		d.returnPipe()
		return io.EOF
	}
	d.pending = d.got
	if err := d.dstRaw.Write(d.spliceOut); err != nil || d.ioErr != nil {
		d.pipe.close() // may still hold data: never lend it again
		d.hasPipe = false
		if err == nil {
			err = d.ioErr
		}
		return err
	}
	d.account(d.got)
	return nil
}

// spliceInOnce is the RawConn.Read callback for splice mode. The pipe goes
// back to the pool before waiting, so a connection that goes quiet holds none.
func (d *direction) spliceInOnce(fd uintptr) bool {
	if !d.hasPipe {
		p, err := d.r.pipes.get()
		if err != nil {
			d.got, d.ioErr = 0, err
			return true
		}
		d.pipe, d.hasPipe = p, true
	}
	for {
		n, err := unix.Splice(int(fd), nil, d.pipe.w, nil, maxSpliceChunk, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			d.returnPipe()
			return false
		}
		d.got, d.ioErr = int(max(n, 0)), err
		return true
	}
}

// spliceOutOnce is the RawConn.Write callback: it empties the pipe into
// dst, waiting for writability as often as needed.
func (d *direction) spliceOutOnce(fd uintptr) bool {
	for d.pending > 0 {
		n, err := unix.Splice(d.pipe.r, nil, int(fd), nil, d.pending, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch err {
		case nil:
			d.pending -= int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			d.ioErr = err
			return true
		}
	}
	return true
}

// returnPipe gives an empty pipe back to the pool.
func (d *direction) returnPipe() {
	if d.hasPipe {
		d.r.pipes.put(d.pipe)
		d.hasPipe = false
	}
}

func (d *direction) account(n int) {
	d.n += int64(n)
	if d.count != nil {
		d.count.Add(float64(n))
	}
}
