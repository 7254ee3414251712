// Package proxy is the layer-4 data path: it accepts client connections on
// the VIP listeners, picks a backend from the pool, dials it with
// transparent retry on failure, and relays bytes both ways without looking
// at them, so TLS and mTLS pass through untouched. It reads as tcpproxy
// does (the listener, the backend picker, the dialer with retry, the copy
// loop) without tcpproxy's goroutine and 4 KB peek buffer per connection,
// which only its SNI and HTTP routes use. Sockets are accepted and dialed
// with system calls of its own and kept out of Go's poller until a
// goroutine must wait on one (engine.FileConn); only a backend given
// by name goes through net. The I/O engine, package engine, moves the
// bytes; this package is the connection layer above it.
//
// Who owns what. The accept loop owns a client connection until it hands
// it to a setup worker (HandleConn); the worker owns it and the backend
// connection it dials until it makes a session, and closes them if it
// cannot (refuse, dial). From then on the session owns both sockets
// (session.go). Whoever closes, a client socket is closed by closeClient
// and a backend socket by closeBackend, the only code that closes either
// (TestOnlyTheClosersCloseSockets): each first stops the parking of the
// direction that reads the socket, if any (CloseSockets for both;
// Evacuate for the backend's alone, so that its reader replays
// elsewhere; failover, for the backend socket it replaces, is that
// reader itself). Each direction (engine's relay.go) starts parked: the
// parker (engine's park.go) then owns its copy state, under the direction's pk.mu, and
// passes small messages and the end of the stream on itself. A direction
// whose bytes must wait, or that carries bulk, or must replay, runs on one
// goroutine at a time until it parks again. A direction that reads the
// end of its stream half-closes the other socket and stays parked for a
// reset of its source only (watchForReset); one that fails (a reset,
// EPIPE, a timeout) aborts both sockets, so that the peer on the other
// side gets a reset too, never a FIN that would make a cut stream look
// complete (AbortSockets). The last direction to end closes both sockets
// and ends the session (finish). The engine calls back into the session
// through engine.Conn, and never closes a socket itself.
//
// Lock order. The lock order of the data path, this package's session.mu
// among the engine's locks, is engine's (its package doc and
// lockorder.go): session.mu is an engine.Mutex of rank SessionLock.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/listen"
	"github.com/vipproxy/vipproxy/service/metrics"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// Options can change on reload; a connection uses the ones current when
// it arrived.
type Options struct {
	DialTimeout  time.Duration
	DialAttempts int
	// KeepAlive is the TCP keepalive idle time on both sides (the probes
	// that follow are spaced by keepAliveConfig).
	KeepAlive time.Duration
	// UserTimeout is TCP_USER_TIMEOUT on both sides.
	UserTimeout time.Duration
	// MaxConnections caps open client connections; 0 means no cap (the
	// daemon derives one from the descriptor limit: DerivedMaxConnections).
	MaxConnections int
	// AcceptBackoffMax caps the pause after EMFILE and similar.
	AcceptBackoffMax time.Duration

	// The wanted options of a backend socket, in two parts (splitOptions):
	// connectOpts are set when it is dialed, keepOpts once its connection
	// outlives its first idle check (session.KeepBackendAlive).
	connectOpts, keepOpts []sockOpt
	dialer                *net.Dialer // for a backend given by name
}

// Counters are the proxy-wide metrics; per-backend ones live on the backend.
type Counters struct {
	Retries           *metrics.Counter
	RejectedNoBackend *metrics.Counter
	RejectedLimit     *metrics.Counter
	// AcceptErrors counts accept and descriptor errors by reason.
	AcceptErrors func(reason string)
}

// Proxy accepts on the VIP listeners and balances over a pool.
type Proxy struct {
	pool     *balance.Pool
	log      *slog.Logger
	counters Counters
	opts     atomic.Pointer[Options]
	relay    *engine.Engine
	// engine relays each session's two sockets: relay, the parked
	// relay (package engine); tests run the session code against a
	// plain one too (plainengine_test.go).
	engine    relayEngine
	open      atomic.Int64
	listeners []net.Listener // as wrapped by Start
	stopped   chan struct{}  // closed when an accept loop ends
	stopOnce  sync.Once
	stopErr   error
	closing   atomic.Bool
	// handoff passes accepted connections to idle setup workers.
	handoff chan net.Conn
	// own are the listeners' addresses, set by Start: a backend dial that
	// reaches one of them is refused (ownListener).
	own []netip.AddrPort
	// shared counts the open connections of every proxy of the daemon
	// (one per port), held against MaxConnections; nil: this one's alone.
	shared *atomic.Int64
}

// ShareCap makes MaxConnections cap the connections of every proxy given
// the same counter (the ports of one daemon share the descriptors the cap
// protects) instead of this proxy's alone. Call it before Start.
func (p *Proxy) ShareCap(open *atomic.Int64) { p.shared = open }

// opened counts an accepted connection and returns the count the cap is
// held against.
func (p *Proxy) opened() int64 {
	n := p.open.Add(1)
	if p.shared != nil {
		n = p.shared.Add(1)
	}
	return n
}

// closed counts a connection as closed.
func (p *Proxy) closed() {
	p.open.Add(-1)
	if p.shared != nil {
		p.shared.Add(-1)
	}
}

// workerIdle is how long a setup worker waits for the next connection
// before it ends.
const workerIdle = 10 * time.Second

// New returns a proxy over pool. Start it with Start.
func New(pool *balance.Pool, opts Options, counters Counters, log *slog.Logger) *Proxy {
	p := &Proxy{pool: pool, log: log, counters: counters, relay: engine.New(log), stopped: make(chan struct{}), handoff: make(chan net.Conn)}
	p.engine = parkedEngine{p.relay}
	p.SetOptions(opts)
	return p
}

// SetOptions applies new options to connections accepted from now on.
func (p *Proxy) SetOptions(o Options) {
	o.DialAttempts = max(o.DialAttempts, 1)
	o.connectOpts, o.keepOpts = splitOptions(o.wantedOptions())
	// Go's keepalive off: keepOpts come later. Go sets TCP_NODELAY itself,
	// Control the rest of connectOpts.
	connectOpts := o.connectOpts
	o.dialer = &net.Dialer{Timeout: o.DialTimeout, KeepAlive: -1, Control: func(_, _ string, c syscall.RawConn) error {
		return setOptions(c, connectOpts)
	}}
	p.opts.Store(&o)
}

// Open is the number of client connections currently open.
func (p *Proxy) Open() int64 { return p.open.Load() }

// Start accepts on each listener, on a goroutine of its own, and hands
// every connection to a setup worker. Each listener is wrapped so that
// accept errors such as EMFILE pause its loop instead of ending it.
func (p *Proxy) Start(listeners []net.Listener) error {
	opts := p.opts.Load()
	var fixers []*acceptFixer
	for _, ln := range listeners {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			ap := a.AddrPort()
			p.own = append(p.own, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		}
		p.listeners = append(p.listeners, &countingListener{listen.NewBackoff(engine.AcceptRaw(ln), opts.AcceptBackoffMax, p.acceptError), p})
		fixers = append(fixers, p.newAcceptFixer(ln))
	}
	for i, ln := range p.listeners {
		go p.acceptLoop(ln, fixers[i])
	}
	return nil
}

// acceptLoop accepts until the listener fails or is closed; the first
// loop to end closes Stopped.
func (p *Proxy) acceptLoop(ln net.Listener, fixer *acceptFixer) {
	for {
		c, err := ln.Accept()
		if err != nil {
			p.stopOnce.Do(func() {
				if !p.closing.Load() {
					p.stopErr = fmt.Errorf("accept on %s: %w", ln.Addr(), err)
				}
				close(p.stopped)
			})
			return
		}
		fixer.apply(c, p.opts.Load())
		p.HandleConn(c)
	}
}

// Stopped is closed when the accept loops end; Err tells why.
func (p *Proxy) Stopped() <-chan struct{} { return p.stopped }

// Err is the error that ended the accept loops, nil after StopAccepting.
func (p *Proxy) Err() error { return p.stopErr }

// Accepting reports whether the accept loops are still running.
func (p *Proxy) Accepting() bool {
	select {
	case <-p.stopped:
		return false
	default:
		return true
	}
}

// StopAccepting closes our listeners. Under socket activation systemd
// keeps its copy of the socket, so connection attempts wait in its
// backlog for the next start instead of being refused.
func (p *Proxy) StopAccepting() {
	p.closing.Store(true)
	if len(p.listeners) == 0 {
		return // never started
	}
	for _, ln := range p.listeners {
		ln.Close()
	}
	<-p.stopped
}

// Drain waits until no connection is open or ctx is done, checking every
// 50 ms, and reports whether everything finished by itself.
func (p *Proxy) Drain(ctx context.Context) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for p.open.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// Close releases the pooled pipes and the parker (after a drain: a
// connection still parked then stays open until the process exits).
func (p *Proxy) Close() { p.relay.Close() }

func (p *Proxy) acceptError(err error) {
	reason := listen.Reason(err)
	if p.counters.AcceptErrors != nil {
		p.counters.AcceptErrors(reason)
	}
	p.log.Warn("accept failed; backing off", "reason", reason, "err", err)
}

// HandleConn proxies one client connection. It hands the connection to an
// idle setup worker, or starts one, and never waits: the accept loop calls
// it. A fresh goroutine per connection would also grow its small stack
// twice (copying it each time) while dialing; a worker's has grown already.
func (p *Proxy) HandleConn(c net.Conn) {
	select {
	case p.handoff <- c:
	default:
		go p.setupWorker(c)
	}
}

// setupWorker sets up connections until none came for workerIdle.
func (p *Proxy) setupWorker(c net.Conn) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		p.setup(c)
		idle.Reset(workerIdle)
		select {
		case c = <-p.handoff:
		case <-idle.C:
			return
		}
	}
}

// setup dials a backend for c and starts relaying.
func (p *Proxy) setup(c net.Conn) {
	client, ok := c.(socket)
	if !ok {
		p.refuse(c)
		return
	}
	opts := p.opts.Load()
	b, backend, backendRaw := p.dial(opts, nil)
	if backend == nil {
		if p.debug() {
			p.log.Debug("connection refused: no backend could be dialed", "client", client.RemoteAddr())
		}
		p.refuse(c)
		return
	}
	if p.debug() {
		p.log.Debug("connection", "client", client.RemoteAddr(), "backend", b.Name, "local", backend.LocalAddr())
	}
	s := p.newSession(opts, client, b, backend)
	// Relay on goroutines of the session's own: this worker goes back to
	// setting up connections.
	p.engine.start(s, backendRaw)
}

// debug reports whether debug lines are wanted. Every Debug call on the
// connection path sits behind it, so that at a higher level none of its
// arguments is even built (BenchmarkConnectionSetup: same allocs/op).
func (p *Proxy) debug() bool {
	return p.log.Enabled(context.Background(), slog.LevelDebug)
}

// refuse closes a client connection that gets no session and stops
// counting it as open (it was counted at accept).
func (p *Proxy) refuse(c net.Conn) {
	p.closed()
	closeClient(c, nil)
}

// dial connects to a backend, trying up to DialAttempts different ones
// (counting those in exclude, already tried): a failed dial marks the
// backend suspect and moves on, so a client never sees a dead backend
// while a healthy one is left.
func (p *Proxy) dial(opts *Options, exclude []*balance.Backend) (*balance.Backend, socket, syscall.RawConn) {
	var triedBuf [8]*balance.Backend
	tried := append(triedBuf[:0], exclude...)
	for attempt := len(exclude); attempt < opts.DialAttempts; attempt++ {
		b := p.pool.Pick(tried)
		if b == nil {
			break
		}
		if attempt > 0 {
			p.counters.Retries.Inc()
		}
		start := time.Now()
		c, raw, err := p.dialBackend(opts, b)
		var setup *setupError
		switch {
		case err == nil:
			b.Stats.DialDuration.Observe(time.Since(start).Seconds())
			return b, c, raw
		case err == errOwnListener:
			p.refuseLoop(b)
			tried = append(tried, b)
			continue
		case errors.As(err, &setup):
			p.log.Warn("cannot set up a backend connection", "backend", b.Name, "err", err)
			p.counters.RejectedNoBackend.Inc()
			return nil, nil, nil
		case balance.LocalFault(err):
			// Our own shortage, not the backend's fault: do not blame it.
			p.acceptError(err)
			return nil, nil, nil
		}
		b.Stats.DialErrors.Inc()
		if p.pool.DialFailed(b) {
			p.log.Warn("dial failed; backend suspect until its next good check", "backend", b.Name, "address", b.Address, "err", err)
		} else if p.debug() {
			p.log.Debug("dial failed; trying another backend", "backend", b.Name, "attempt", attempt+1, "of", opts.DialAttempts, "err", err)
		}
		tried = append(tried, b)
	}
	p.counters.RejectedNoBackend.Inc()
	return nil, nil, nil
}

// errOwnListener: the backend's address is one of our own VIP listeners.
var errOwnListener = errors.New("the backend is our own listener")

// relayEngine is the seam between the session (session.go: pick, dial,
// replay, failover, evacuation, and the only closers of its sockets) and
// the I/O that moves its bytes. start relays the session's two sockets,
// both ways, until both directions end, taking the client's bytes
// through the session until the backend answers (Keep, MarkAnswered,
// Failover), and ends the session: a direction that reads its end
// half-closes the other socket (CloseWrite), one that fails aborts both
// (AbortSockets), and the last one closes both (CloseSockets) and calls
// End. It never closes a socket itself.
type relayEngine interface {
	start(s *session, backendRaw syscall.RawConn)
}

// parkedEngine is the engine the product runs: engine.Engine, the
// parked relay.
type parkedEngine struct{ e *engine.Engine }

func (e parkedEngine) start(s *session, backendRaw syscall.RawConn) { e.e.Start(s, backendRaw) }

// setupError is a failure to set up our own socket (engine.SetupError).
type setupError = engine.SetupError

// socket is a client or backend socket (engine.Socket).
type socket = engine.Socket

// dialBackend connects to b with opts' connectOpts: an IP address with
// dialAddr, a name through net.Dialer, which resolves it (and sets
// TCP_NODELAY, and its Control the rest of connectOpts). Either way a backend that is our own
// listener is refused.
func (p *Proxy) dialBackend(opts *Options, b *balance.Backend) (socket, syscall.RawConn, error) {
	if addr, ok := b.IPAddress(); ok {
		if p.ownListener(addr) {
			return nil, nil, errOwnListener
		}
		c, err := p.relay.Dial(addr, opts.connectOpts, opts.DialTimeout)
		if err != nil {
			if c != nil {
				closeBackend(c, nil)
			}
			return nil, nil, err
		}
		return c, c.RawConn(), nil
	}
	c, err := opts.dialer.Dial("tcp", b.Address)
	if err != nil {
		return nil, nil, err
	}
	conn := c.(*net.TCPConn)
	if ra, ok := conn.RemoteAddr().(*net.TCPAddr); ok && p.ownListener(ra.AddrPort()) {
		closeBackend(conn, nil)
		return nil, nil, errOwnListener
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		closeBackend(conn, nil)
		return nil, nil, &setupError{Err: fmt.Errorf("a connection to %s: %w", b.Address, err)}
	}
	return conn, raw, nil
}

// ownListener reports whether dst is one of our own VIP listeners: a
// backend whose name came to resolve to the VIP (check refuses one that
// resolves so at load) would make every client connection a connection to
// ourselves, until the descriptors run out.
func (p *Proxy) ownListener(dst netip.AddrPort) bool {
	return slices.Contains(p.own, netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()))
}

// refuseLoop marks b down at once (balance.Loops) and says why, once.
func (p *Proxy) refuseLoop(b *balance.Backend) {
	if tr := p.pool.Observe(b, balance.Loops); tr.Changed() {
		p.log.Error("backend reaches vipproxy's own listener (its name resolves to the VIP?); marked down, not dialed again until its checks pass",
			"backend", b.Name, "address", b.Address)
	}
}

// countingListener counts a connection as open the moment it is accepted,
// before a setup worker has it: a drain that starts in between must wait
// for it, not exit under it. Past MaxConnections it
// closes the connection at once, in the accept loop: refused later, on
// the goroutines of a flood, every accepted one would hold its descriptor
// meanwhile, and the descriptors the cap keeps for health checks and the
// admin endpoint would be gone.
type countingListener struct {
	net.Listener
	p *Proxy
}

func (l *countingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return c, err
		}
		max := int64(l.p.opts.Load().MaxConnections)
		if open := l.p.opened(); max <= 0 || open <= max {
			return c, nil
		}
		l.p.counters.RejectedLimit.Inc()
		if l.p.debug() {
			l.p.log.Debug("connection refused: limits.max_connections reached", "client", c.RemoteAddr(), "max", max)
		}
		l.p.refuse(c)
	}
}
