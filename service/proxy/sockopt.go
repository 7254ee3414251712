package proxy

import (
	"log/slog"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// The options of a proxied socket, set once each. The proxy accepts and
// dials with system calls of its own (fileConn), which set none; a
// backend given by name is dialed by net.Dialer with Go's keepalive off
// and gets them after. Linux copies a listener's socket options to every
// socket it accepts, so the wanted ones are set on the listeners, and an
// accepted socket gets again only those it turns out to lack
// (acceptFixer). Before, each proxied connection cost 15 setsockopt
// calls; then 6 (11 on a systemd listener, whose sockets Go's accept
// gave its own keepalive defaults); then those of the dialed socket only;
// now TCP_NODELAY there, and the rest only on a connection that lives on
// (splitOptions).

// keepAliveConfig is the keepalive of both sides of a connection. Linux
// ends an idle connection at TCP_USER_TIMEOUT as soon as one probe is
// unanswered (tcp_keepalive_timer), so with probes one idle time apart
// (15 s, user timeout 30 s) a single lost probe or ACK cut an idle
// connection: 3,000 idle connections through the daemon on a busy
// loopback, which drops packets in bursts when thousands of probes fire
// at once, lost 2,681 in 64 s (service/daemon TestFloodKeepsConnections
// held longer). Probes are spaced so that four fit before the user
// timeout (whole seconds: the kernel counts in seconds); a user timeout
// not above the idle time leaves room for one probe only, as configured.
// With a user timeout the kernel ignores the probe count, so it is left
// as it is (Count -1): one system call less per dialed socket.
func keepAliveConfig(idle, user time.Duration) net.KeepAliveConfig {
	interval := idle
	if idle > 0 && user > idle {
		interval = min(idle, max(((user-idle)/4).Truncate(time.Second), time.Second))
	}
	count := 3
	if user > 0 {
		count = -1
	}
	return net.KeepAliveConfig{Enable: true, Idle: idle, Interval: interval, Count: count}
}

// sockOpt is one integer socket option and its value.
type sockOpt = engine.SockOpt

// goKeepAliveDefault is what Go puts in place of a zero KeepAliveConfig
// field (net.KeepAliveConfig's documentation): 15 s, 15 s, 9 probes.
const goKeepAliveDefault = 15 * time.Second

// wantedOptions are the options of every proxied socket: TCP_NODELAY
// (an apiserver's watch events must not wait for an ACK), SO_OOBINLINE
// (urgentInline), and the keepalive and user timeout, as Go would set the
// same keepAliveConfig.
func (o *Options) wantedOptions() []sockOpt {
	ka := keepAliveConfig(o.KeepAlive, o.UserTimeout)
	secs := func(d time.Duration) int {
		if d == 0 {
			d = goKeepAliveDefault
		}
		return int((d + time.Second - 1) / time.Second) // Go rounds up too
	}
	opts := []sockOpt{
		{Level: unix.IPPROTO_TCP, Name: unix.TCP_NODELAY, Value: 1},
		urgentInline,
		{Level: unix.SOL_SOCKET, Name: unix.SO_KEEPALIVE, Value: 1},
		{Level: unix.IPPROTO_TCP, Name: unix.TCP_KEEPIDLE, Value: secs(ka.Idle)},
		{Level: unix.IPPROTO_TCP, Name: unix.TCP_KEEPINTVL, Value: secs(ka.Interval)},
	}
	if ka.Count >= 0 {
		opts = append(opts, sockOpt{Level: unix.IPPROTO_TCP, Name: unix.TCP_KEEPCNT, Value: ka.Count})
	}
	if o.UserTimeout > 0 {
		opts = append(opts, sockOpt{Level: unix.IPPROTO_TCP, Name: unix.TCP_USER_TIMEOUT, Value: int(o.UserTimeout.Milliseconds())})
	}
	return opts
}

// urgentInline keeps an urgent byte (TCP's MSG_OOB) in the stream: the
// proxy passes it on as an ordinary byte, where it was sent, and the
// stream stays whole (without it the kernel takes the byte out of the
// stream, for a MSG_OOB read that a proxy never makes). Its urgency is
// not passed on. Either way a read stops at the urgent mark, so the
// parker reads on while urgent data is pending (parkEvents).
var urgentInline = sockOpt{Level: unix.SOL_SOCKET, Name: unix.SO_OOBINLINE, Value: 1}

// splitOptions divides the wanted options of a backend socket: TCP_NODELAY
// and SO_OOBINLINE are set when it is dialed (the first bytes must not
// wait, and urgent data may come with them), the keepalive
// and user timeout (keep) only once the connection outlives its first
// idle check. Those matter for a connection that lives on (a watch), and
// a short one (a request, a probe) is over before: 4 system calls of the
// 30 each proxied connection cost (make bench, syscalls).
func splitOptions(wanted []sockOpt) (connect, keep []sockOpt) {
	for _, o := range wanted {
		if o == urgentInline || o.Level == unix.IPPROTO_TCP && o.Name == unix.TCP_NODELAY {
			connect = append(connect, o)
		} else {
			keep = append(keep, o)
		}
	}
	return connect, keep
}

// setOptions sets opts on a socket, all of them even if one fails, and
// returns the first error.
func setOptions(c syscall.RawConn, opts []sockOpt) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		for _, o := range opts {
			if e := unix.SetsockoptInt(int(fd), o.Level, o.Name, o.Value); e != nil && serr == nil {
				serr = e
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// missingOptions returns those of opts that the socket does not carry.
func missingOptions(c syscall.RawConn, opts []sockOpt) []sockOpt {
	var missing []sockOpt
	c.Control(func(fd uintptr) {
		for _, o := range opts {
			if v, err := unix.GetsockoptInt(int(fd), o.Level, o.Name); err != nil || v != o.Value {
				missing = append(missing, o)
			}
		}
	})
	return missing
}

// acceptFixer gives the sockets one listener accepts the wanted options
// with as few system calls as it can, for one accept loop. It sets them
// on the listener, for accepted sockets to inherit. Sockets that were
// already in the accept queue then (a socket-activated start: the
// backlog that built up while no process accepted) were cloned without
// them: those, counted from the listener's TCP_INFO, get every option.
// The next socket is read back (a few getsockopt calls, once): what it
// lacks is what the kernel did not copy or the listener refused (or,
// when net's accept is used, what it overwrote), and each socket after
// it gets just that set again. All of this is
// learnt anew when the options change (a reload).
type acceptFixer struct {
	ln      syscall.RawConn // nil: the listener has no descriptor
	log     *slog.Logger
	learnt  *Options  // the options the rest was set up for
	want    []sockOpt // learnt.wantedOptions()
	cloned  int       // sockets still queued from before the listener had want
	probing bool      // the next socket tells what to set on each
	fix     []sockOpt // what each accepted socket needs set
}

func (p *Proxy) newAcceptFixer(ln net.Listener) *acceptFixer {
	f := &acceptFixer{log: p.log.With("listener", ln.Addr())}
	if sc, ok := ln.(syscall.Conn); ok {
		f.ln, _ = sc.SyscallConn()
	}
	f.learn(p.opts.Load())
	return f
}

// learn sets opts on the listener and starts learning anew.
func (f *acceptFixer) learn(opts *Options) {
	f.learnt, f.want = opts, opts.wantedOptions()
	f.fix, f.cloned, f.probing = f.want, 0, false
	if f.ln == nil {
		return
	}
	if err := setOptions(f.ln, f.want); err != nil {
		f.log.Warn("cannot set keepalive or TCP_USER_TIMEOUT on a listener; each accepted connection gets them instead", "err", err)
		return
	}
	f.ln.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			f.cloned = int(info.Unacked) // a listener's accept queue length
		}
	})
	f.probing = true
}

// apply gives c, just accepted, the options it lacks under opts. In the
// common case (nothing to set) it makes no system call and no allocation.
func (f *acceptFixer) apply(c net.Conn, opts *Options) {
	if f.learnt != opts {
		f.learn(opts)
		f.cloned++ // c itself was accepted before the listener had them
	}
	if f.cloned == 0 && !f.probing && len(f.fix) == 0 {
		return
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	set := f.fix
	switch {
	case f.cloned > 0:
		f.cloned--
		set = f.want
	case f.probing:
		f.probing = false
		f.fix = missingOptions(raw, f.want)
		set = f.fix
	}
	if len(set) > 0 {
		// An error leaves the kernel's default on this socket only, as
		// Go's own accept ignores it.
		setOptions(raw, set)
	}
}
