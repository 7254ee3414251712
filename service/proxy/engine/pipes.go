package engine

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// pipe is a kernel pipe used to splice between two sockets without
// copying through user space.
type pipe struct{ r, w int }

// pipePool lends pipes to connections while data flows and takes them
// back when the connection goes idle, so an idle connection holds no
// pipe: Go's own splice keeps one per direction for a connection's whole
// life (4 extra descriptors per proxied connection).
type pipePool struct {
	mu   Mutex[pipesLock]
	free []pipe
	max  int          // idle pipes kept; the rest are closed
	lent atomic.Int64 // pipes out with connections right now
}

func newPipePool(maxIdle int) *pipePool { return &pipePool{max: maxIdle} }

func (p *pipePool) get() (pipe, error) {
	p.lent.Add(1)
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		pp := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return pp, nil
	}
	p.mu.Unlock()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		p.lent.Add(-1)
		return pipe{}, err
	}
	// A larger pipe moves a bulk transfer in fewer splices. Best effort:
	// past the per-user pipe quota the kernel keeps the default size.
	unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, pipeSize)
	return pipe{r: fds[0], w: fds[1]}, nil
}

// pipeSize is the buffer asked for each pooled pipe.
const pipeSize = 256 << 10

// put returns an empty pipe. A pipe that may still hold data must be
// given to discard instead.
func (p *pipePool) put(pp pipe) {
	p.lent.Add(-1)
	p.mu.Lock()
	if len(p.free) < p.max {
		p.free = append(p.free, pp)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	pp.close()
}

// discard closes a lent pipe that may still hold data.
func (p *pipePool) discard(pp pipe) {
	p.lent.Add(-1)
	pp.close()
}

// drain closes every idle pipe (at shutdown).
func (p *pipePool) drain() {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, pp := range free {
		pp.close()
	}
}

func (pp pipe) close() {
	unix.Close(pp.r)
	unix.Close(pp.w)
}
