package proxy

// Handover: a restart passes each established connection, its two
// sockets, to the next daemon instead of closing it. What makes that
// safe is the quiet point: a connection is handed over only when neither
// direction holds a byte in user space or in a splice pipe, so that the
// sockets alone are the connection's whole state and the next daemon
// resumes the streams exactly where they stopped. A direction is quiet
// when it is parked (the parker passes a message on whole or not at all)
// or when its goroutine is between two rounds of its copy loop (run),
// where every byte read has been written. Freezing takes a parked
// direction out of the parker, and stops a running one at its next round
// (stopForHandover); a frozen direction has no goroutine and no parker,
// so nothing touches its sockets until they are released (handed over)
// or thawed (the handover did not take them).
//
// A connection whose backend has not answered yet keeps the client's
// first bytes for a replay (session.Keep): those would be lost, so it is
// not frozen until it is answered. A client that half-closed (sent its
// FIN, waits for the answer) is handed over: its end was passed on and
// is read again by the next daemon. One whose backend half-closed, or
// whose writes wait for a peer that does not read, is not frozen; the
// daemon closes what is not frozen in time.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// Reasons a connection is not handed over (Unfrozen.Reason).
const (
	// ReasonReplayWindow: the backend had not answered yet, so the
	// client's first bytes were still kept for a replay.
	ReasonReplayWindow = engine.ReasonReplayWindow
	// ReasonHalfClosed: one direction had ended (or the connection was
	// being closed).
	ReasonHalfClosed = engine.ReasonHalfClosed
	// ReasonBusy: a write still waited for a peer that did not read.
	ReasonBusy = engine.ReasonBusy
)

// tryFreeze asks s to stop at a quiet point and reports whether both
// directions are frozen now; otherwise why not (engine.Relay.TryFreeze).
func (s *session) tryFreeze() (bool, string) {
	return s.relaying().TryFreeze()
}

// thaw undoes tryFreeze: the session relays again.
func (s *session) thaw() {
	s.relaying().Thaw()
}

// Pair is a connection frozen at a quiet point: its two sockets are all
// of its state. Store its Files, then Release it; or Thaw it.
type Pair struct {
	Backend *balance.Backend
	s       *session
}

// Files returns duplicates of the client and the backend socket, for the
// caller to pass on and close.
func (p *Pair) Files() (client, backend *os.File, err error) {
	conn, _ := p.s.Current()
	if client, err = dupSocket(p.s.client, "client"); err != nil {
		return nil, nil, err
	}
	if backend, err = dupSocket(conn, "backend"); err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, backend, nil
}

// Release closes this daemon's descriptors of a pair handed over (their
// duplicates keep the connection open: no FIN is sent) and stops counting
// it.
func (p *Pair) Release() {
	conn, _ := p.s.Current()
	// Frozen: neither direction runs or parks.
	closeClient(p.s.client, nil)
	closeBackend(conn, nil)
	p.s.End()
}

// Thaw lets a pair that was not handed over relay again.
func (p *Pair) Thaw() { p.s.thaw() }

// Close ends a pair that is not handed over, as a drain's timeout does.
func (p *Pair) Close() {
	p.s.thaw()
	p.s.CloseSockets()
}

// Unfrozen is a connection that reached no quiet point in time.
type Unfrozen struct {
	Reason string
	s      *session
}

// Close ends the connection, as a drain's timeout does.
func (u *Unfrozen) Close() {
	u.s.thaw() // a direction frozen alone must run to see the close
	u.s.CloseSockets()
}

// Freeze stops every connection of backends (this proxy's) at a quiet
// point, looking again every 10 ms, until all are frozen or wait has
// passed, or answerWait while a connection still waits for its backend's
// first answer (its replay window: closing it would fail a request that
// is about to be answered); accepting must have stopped. A connection accepted but still
// dialing its backend is waited for too (counted open, not yet on a
// backend). It returns the pairs frozen and the connections that were
// not, with the reason of each.
func (p *Proxy) Freeze(ctx context.Context, backends []*balance.Backend, wait, answerWait time.Duration) ([]*Pair, []*Unfrozen) {
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		pairs, rest := p.freezeOnce(backends)
		if len(rest) == 0 && int64(len(pairs)) >= p.open.Load() {
			return pairs, nil
		}
		if waited := time.Since(start); waited >= max(wait, answerWait) || waited >= wait && !awaitsAnswer(rest) {
			return pairs, rest
		}
		select {
		case <-ctx.Done():
			return pairs, rest
		case <-tick.C:
		}
	}
}

// awaitsAnswer reports whether a connection of rest is in its replay
// window.
func awaitsAnswer(rest []*Unfrozen) bool {
	for _, u := range rest {
		if u.Reason == ReasonReplayWindow {
			return true
		}
	}
	return false
}

// freezeOnce tries to freeze every connection of backends once.
func (p *Proxy) freezeOnce(backends []*balance.Backend) (pairs []*Pair, rest []*Unfrozen) {
	for _, b := range backends {
		for _, c := range b.Conns() {
			s, ok := c.(*session)
			if !ok || s.p != p {
				continue
			}
			if frozen, why := s.tryFreeze(); frozen {
				pairs = append(pairs, &Pair{Backend: b, s: s})
			} else {
				rest = append(rest, &Unfrozen{Reason: why, s: s})
			}
		}
	}
	return pairs, rest
}

// dupSocket duplicates c's descriptor (close-on-exec).
func dupSocket(c socket, what string) (*os.File, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("the %s socket: %w", what, err)
	}
	dup := -1
	var derr error
	if err := raw.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("the %s socket: %w", what, err)
	}
	if derr != nil {
		return nil, fmt.Errorf("duplicate the %s socket: %w", what, derr)
	}
	return os.NewFile(uintptr(dup), what), nil
}

// Resume takes over a connection a previous daemon handed over, client
// and backend its sockets, bound to b: it checks that both are connected
// TCP sockets (the backend's to b's address, when b has an IP address)
// and relays them as any connection, counted on b. It takes the files
// in any case (closed on error).
func (p *Proxy) Resume(client, backend *os.File, b *balance.Backend) error {
	cc, cerr := takeSocket(client)
	bc, berr := takeSocket(backend)
	err := errors.Join(cerr, berr)
	if want, ok := b.IPAddress(); ok && err == nil && netip.AddrPortFrom(want.Addr().Unmap(), want.Port()) != bc.Peer() {
		err = fmt.Errorf("the backend socket is connected to %s, not to %s's %s", bc.Peer(), b.Name, want)
	}
	if err != nil {
		if cc != nil {
			closeClient(cc, nil)
		}
		if bc != nil {
			closeBackend(bc, nil)
		}
		return err
	}
	p.opened()
	s := p.newSession(p.opts.Load(), cc, b, bc)
	s.answered.Store(true) // nothing was kept to replay
	p.engine.start(s, bc.RawConn())
	return nil
}

// takeSocket takes f's socket as a descriptor of the proxy's own
// (non-blocking, close-on-exec; f is closed) once it is a TCP socket
// whose connection still carries bytes one way at least: established,
// or half closed by either side. On an error it may return the socket
// too, for the caller to close (closeClient, closeBackend).
func takeSocket(f *os.File) (*engine.FileConn, error) {
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	fd := -1
	if err := raw.Control(func(cfd uintptr) { fd, err = unix.FcntlInt(cfd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || fd < 0 {
		return nil, fmt.Errorf("%s: duplicate: %w", f.Name(), err)
	}
	peer, err := connectedTCP(fd)
	c := engine.NewFileConn(fd, peer)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		return c, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return c, nil
}

// connectedTCP checks that fd is a TCP socket in a state that still
// carries bytes and returns its peer's address.
func connectedTCP(fd int) (netip.AddrPort, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("not a socket: %w", err)
	}
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil || typ != unix.SOCK_STREAM || proto != unix.IPPROTO_TCP {
		return netip.AddrPort{}, errors.New("not a TCP socket")
	}
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("TCP_INFO: %w", err)
	}
	switch info.State {
	case unix.BPF_TCP_ESTABLISHED, unix.BPF_TCP_CLOSE_WAIT, unix.BPF_TCP_FIN_WAIT1, unix.BPF_TCP_FIN_WAIT2:
	default:
		return netip.AddrPort{}, fmt.Errorf("connection closed (TCP state %d)", info.State)
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getpeername: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)), nil
	}
	return netip.AddrPort{}, errors.New("not an IP socket")
}
