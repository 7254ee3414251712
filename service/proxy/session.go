package proxy

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// maxReplay bounds the client bytes kept until the backend answers: a TLS
// ClientHello or a request head fits many times over.
const maxReplay = 16 << 10

// session is one client connection and the backend it is bound to.
//
// Until the backend sends its first byte, the client's bytes are kept, so
// that a backend which dies without answering — an apiserver SIGKILLed
// after its kernel completed our handshake — costs the client nothing:
// the bytes are replayed on another backend. Once the backend has
// answered, the session is bound for good and the relay runs without it.
type session struct {
	p      *Proxy
	opts   *Options
	client socket

	answered atomic.Bool // the backend sent a byte (or replay is impossible)

	mu         engine.Mutex[engine.SessionLock]
	backend    *balance.Backend
	conn       socket
	untrack    func()
	replay     []byte
	clientDone bool // the client half-closed: a replay ends with its FIN
	closed     bool // CloseSockets was called: nothing to replay into
	tried      []*balance.Backend
	rel        *engine.Relay // its relay by the parked engine (once relaying)
	keptAlive  socket        // the backend socket that has opts.keepOpts
	keptReset  socket        // a backend socket a write of kept bytes found reset (KeptWriteFailed)
}

func (p *Proxy) newSession(opts *Options, client socket, b *balance.Backend, conn socket) *session {
	s := &session{p: p, opts: opts, client: client}
	s.bind(b, conn)
	return s
}

// bind attaches the session to a backend connection; s.mu held or unshared.
func (s *session) bind(b *balance.Backend, conn socket) {
	if s.untrack != nil {
		s.untrack()
		s.backend.Stats.ConnectionsOpen.Dec()
	}
	s.backend, s.conn = b, conn
	s.untrack = b.Track(s)
	b.Stats.ConnectionsTotal.Inc()
	b.Stats.ConnectionsOpen.Inc()
}

// End releases the backend's accounting once the relay is over and
// counts the client connection as closed.
func (s *session) End() {
	s.mu.Lock()
	s.untrack()
	s.backend.Stats.ConnectionsOpen.Dec()
	s.mu.Unlock()
	s.p.closed()
}

// Abort ends a session whose relay could not start.
func (s *session) Abort() {
	s.CloseSockets()
	s.End()
}

// CloseSockets closes the client and backend sockets.
func (s *session) CloseSockets() {
	s.mu.Lock()
	s.closed = true
	conn, rel := s.conn, s.rel
	s.mu.Unlock()
	closeClient(s.client, rel)
	closeBackend(conn, rel)
}

// AbortSockets closes both sockets with a reset (RST) instead of a FIN:
// a connection that failed on one side (a reset, EPIPE, a timeout) must
// not look complete on the other, where a plain-TCP client would take a
// cut stream for a whole one. A socket already reset sends nothing.
func (s *session) AbortSockets() {
	conn, _ := s.Current()
	resetOnClose(s.client)
	resetOnClose(conn)
	s.CloseSockets()
}

// resetOnClose makes the socket's close send a reset (SO_LINGER 0); a
// socket closed already is left as it is.
func resetOnClose(c socket) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	})
}

// ClientDone reports whether the client half-closed (engine.Conn).
func (s *session) ClientDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientDone
}

// IsClosed reports whether CloseSockets was called.
func (s *session) IsClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closeClient and closeBackend are the only code that closes a client or
// a backend socket, from its accept or dial to its end: a refusal, a
// failed dial, a failover, an evacuation, a drain, the end of the relay
// and a handover all close through them (TestOnlyTheClosersCloseSockets
// holds that). A closer that bypassed them could drop a parked socket
// from the parker's epoll unseen, or close a descriptor whose number a
// new connection then takes.
//
// rel is the relay whose direction reads c (nil before the relay starts,
// or when the caller is that direction itself, running, or it is
// frozen): that direction stops parking first, since closing a socket
// silently drops it from the parker's epoll and a parked reader would
// never learn of it. With a relay, call them without s.mu (StopParking
// takes pk.mu: lock order).
func closeClient(c io.Closer, rel *engine.Relay) {
	rel.StopParking(engine.Up)
	c.Close()
}

// closeBackend closes a backend socket; closeClient says how.
func closeBackend(c io.Closer, rel *engine.Relay) {
	rel.StopParking(engine.Down)
	c.Close()
}

// Current returns the backend connection and its backend.
func (s *session) Current() (socket, *balance.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn, s.backend
}

// Keep records client bytes while the backend has not answered, for a
// replay, and returns the backend connection to send them to, as it is
// now. It returns nil once the session is bound: the caller then writes
// to current() as to any destination. The caller writes without s.mu: a
// failover meanwhile replays these bytes too, on the new connection, and
// the write to the connection it replaced fails harmlessly. Write errors
// are the backend's reader's to judge (it replays elsewhere or fails).
func (s *session) Keep(chunk []byte) socket {
	if s.answered.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered.Load() {
		return nil
	}
	if len(s.replay)+len(chunk) > maxReplay {
		// Too much to replay: stop keeping bytes and bind for good.
		s.replay = nil
		s.answered.Store(true)
		return nil
	}
	s.replay = append(s.replay, chunk...)
	return s.conn
}

// KeepBackendAlive gives the backend socket the keepalive and user
// timeout (opts.keepOpts) once the connection has outlived an idle check;
// either direction calls it at each. A failure is ours, not the backend's:
// the connection goes on without them, and the log says so.
func (s *session) KeepBackendAlive() {
	s.mu.Lock()
	conn, b := s.conn, s.backend
	done := s.keptAlive == conn
	s.keptAlive = conn
	s.mu.Unlock()
	if done || len(s.opts.keepOpts) == 0 {
		return
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		err = setOptions(raw, s.opts.keepOpts)
	}
	// Only the kernel's refusal is worth a word; any other error means
	// the socket was closed meanwhile (the connection ended).
	var refused syscall.Errno
	if errors.As(err, &refused) {
		s.p.log.Warn("cannot set keepalive or TCP_USER_TIMEOUT on a backend connection; it goes on without them", "backend", b.Name, "err", err)
	}
}

// KeptWriteFailed records that a write of kept bytes to conn failed
// (session.Keep): such a failure is the backend's reader's to judge, but
// a reset's error goes to one system call only, here the write's, and
// the reader then sees a plain end of stream. The direction that reads
// conn asks resetTaken before it passes an end on: a reset must reach
// the client as a reset (TestEnginesAgree).
func (s *session) KeptWriteFailed(conn socket, err error) {
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		return // closed by a failover or an evacuation: not the peer's
	}
	s.mu.Lock()
	s.keptReset = conn
	s.mu.Unlock()
}

// ResetTaken reports whether a write of kept bytes took conn's reset.
func (s *session) ResetTaken(conn socket) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keptReset != nil && s.keptReset == conn
}

// MarkAnswered binds the session: replay is no longer possible.
func (s *session) MarkAnswered() {
	if s.answered.Load() {
		return
	}
	s.mu.Lock()
	s.answered.Store(true)
	s.replay = nil
	s.mu.Unlock()
}

// ClientFinished records that the client half-closed (or failed, and
// CloseSockets follows) and returns the backend connection to pass that
// on to.
func (s *session) ClientFinished() socket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clientDone = true
	return s.conn
}

// Failover is called when the backend closed or reset before answering.
// It dials another backend, replays the client's bytes and returns the
// new connection, or nil when the failure must reach the client. A
// client that half-closed is replayed too: every byte it sent is kept,
// and its FIN follows them (TestHalfClosedClientIsReplayed). Only the
// backend→client direction calls it (its goroutine), so s.tried is its
// alone. The dial runs without s.mu: it may wait up to the dial timeout,
// and a parker keeping the client's next bytes (keep) must not wait with
// it, nor every connection that parker serves. Bytes kept meanwhile go to
// the dead connection and are replayed here with the rest.
func (s *session) Failover() socket {
	s.mu.Lock()
	// A client that closed its side without a byte (a TCP probe of the
	// VIP) got its answer: the backend's close, which passes on
	// (TestEmptyClosedClientIsNotReplayed).
	probe := s.clientDone && len(s.replay) == 0
	if probe || s.answered.Load() || s.closed || len(s.tried) >= s.opts.DialAttempts {
		s.mu.Unlock()
		return nil
	}
	dead := s.backend
	s.tried = append(s.tried, dead)
	s.mu.Unlock()
	if s.p.pool.DialFailed(dead) {
		s.p.log.Warn("backend closed a connection before answering; replaying it on another backend", "backend", dead.Name)
	}
	b, conn, _ := s.p.dial(s.opts, s.tried)
	if conn == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered.Load() || s.closed {
		// More kept meanwhile than a replay takes (keep), or the
		// connection was closed meanwhile.
		closeBackend(conn, nil)
		return nil
	}
	if s.p.debug() {
		s.p.log.Debug("replaying the client's first bytes on another backend", "client", s.client.RemoteAddr(),
			"from", dead.Name, "backend", b.Name, "bytes", len(s.replay))
	}
	if len(s.replay) > 0 {
		if _, err := conn.Write(s.replay); err != nil {
			closeBackend(conn, nil)
			return nil
		}
	}
	if s.clientDone {
		// The client half-closed during the dial, onto the dead
		// connection: pass its end on after the replay.
		conn.CloseWrite()
	}
	old := s.conn
	s.bind(b, conn)
	// Its reader is our caller, running: nothing parked to stop, and
	// StopParking would take pk.mu under s.mu.
	closeBackend(old, nil)
	return conn
}

// Close ends the connection: both sockets (balance.Conn).
func (s *session) Close() error {
	s.CloseSockets()
	return nil
}

// IdleMark reports whether both directions are parked, that is no byte
// moved either way for a while, and a mark that changes each time one of
// them parks anew: two looks that see idle with the same mark mean that
// nothing moved in between. A drain closes connections idle that long.
func (s *session) IdleMark() (mark uint64, idle bool) {
	return s.relaying().IdleMark()
}

// Relaying records the session's relay (engine.Conn).
func (s *session) Relaying(r *engine.Relay) {
	s.mu.Lock()
	s.rel = r
	s.mu.Unlock()
}

// relaying is the session's relay, nil before it starts or under
// another engine.
func (s *session) relaying() *engine.Relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rel
}

// Client is the client socket (engine.Conn).
func (s *session) Client() socket { return s.client }

// Answered reports whether the session is bound: the backend answered,
// or a replay is impossible (engine.Conn).
func (s *session) Answered() bool { return s.answered.Load() }

// KeepsAlive reports whether the backend socket gets keepalive options
// once the connection outlives an idle check (engine.Conn).
func (s *session) KeepsAlive() bool { return len(s.opts.keepOpts) > 0 }

// Evacuate takes the session off its backend, which went down
// (balance.Conn). If the backend has not answered yet, only the backend
// socket is closed: the backend→client direction then replays the
// client's bytes on another backend. Otherwise the whole connection ends,
// so the client reconnects to a healthy apiserver at once.
func (s *session) Evacuate() {
	s.mu.Lock()
	replayable := !s.answered.Load() && !s.closed
	conn, rel := s.conn, s.rel
	s.mu.Unlock()
	if replayable {
		if s.p.debug() {
			s.p.log.Debug("evacuating: the backend went down before answering; replaying elsewhere", "client", s.client.RemoteAddr(), "backend", s.backend.Name)
		}
		closeBackend(conn, rel) // the reader must see the close to replay
		return
	}
	if s.p.debug() {
		s.p.log.Debug("closing: the backend went down; the client reconnects", "client", s.client.RemoteAddr(), "backend", s.backend.Name)
	}
	s.CloseSockets()
}
