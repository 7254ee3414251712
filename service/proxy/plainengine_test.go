package proxy

import (
	"io"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/proxy/engine"
)

// plainEngine is the reference the parked relay is tested against: two
// goroutines per connection, each copying its source to its destination
// through a buffer of its own, as tcpproxy does, and the same session
// code around them (keep, markAnswered, failover, the closers). No
// parker, no splice, no coalescing, no handover: what it does is plain
// enough to be right by reading, so that a test that passes on it and
// fails on the parked relay points at the parked relay.
type plainEngine struct{}

// plainBuf is each direction's buffer: 32 KiB as io.Copy's.
const plainBuf = 32 << 10

// plainConn is a session relayed by the plain engine, with the count of
// its directions still running (an engine.Keeper).
type plainConn struct {
	*session
	live atomic.Int32
}

// Live reports whether a direction still runs.
func (s *plainConn) Live() bool { return s.live.Load() > 0 }

func (plainEngine) start(sess *session, _ syscall.RawConn) {
	s := &plainConn{session: sess}
	s.live.Store(2)
	s.p.relay.KeepAliveLater(s)
	go plainUp(s)
	go plainDown(s)
}

// plainUp copies client→backend: through the session while the backend
// has not answered (keep: a failover replays those bytes), then to the
// backend the session is bound to.
func plainUp(s *plainConn) {
	buf := make([]byte, plainBuf)
	src := s.client.(io.Reader)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := plainToBackend(s, buf[:n]); werr != nil {
				plainFinish(s, true, werr)
				return
			}
		}
		if err != nil {
			plainFinish(s, true, err)
			return
		}
	}
}

func plainToBackend(s *plainConn, chunk []byte) error {
	if conn := s.Keep(chunk); conn != nil {
		if _, err := conn.Write(chunk); err != nil {
			s.KeptWriteFailed(conn, err) // the backend reader's to judge
		} else {
			_, b := s.Current()
			b.Stats.BytesToBackend.Add(uint64(len(chunk)))
		}
		return nil
	}
	conn, b := s.Current()
	_, err := conn.Write(chunk)
	if err == nil {
		b.Stats.BytesToBackend.Add(uint64(len(chunk)))
	}
	return err
}

// plainDown copies backend→client; a backend that ends or fails before
// its first byte is replaced (failover), and the copy goes on from the
// new one.
func plainDown(s *plainConn) {
	buf := make([]byte, plainBuf)
	conn, b := s.Current()
	for {
		n, err := conn.(io.Reader).Read(buf)
		if n > 0 {
			s.MarkAnswered()
			if _, werr := s.client.Write(buf[:n]); werr != nil {
				plainFinish(s, false, werr)
				return
			}
			b.Stats.BytesToClient.Add(uint64(n))
		}
		if err == nil {
			continue
		}
		if n == 0 && !s.answered.Load() {
			if next := s.Failover(); next != nil {
				conn, b = s.Current()
				s.p.relay.KeepAliveLater(s)
				continue
			}
		}
		plainFinish(s, false, err)
		return
	}
}

// plainFinish ends a direction as the parked relay's finish does: the
// end of its stream half-closes the destination (and a reset of the
// source after it still aborts the connection), an error, or a reset
// another call took (resetUnread), aborts both sockets, the last
// direction closes both and ends the session.
func plainFinish(s *plainConn, up bool, err error) {
	failed := err != nil && err != io.EOF
	dst, src := socket(s.client), socket(s.client)
	if up {
		dst = s.ClientFinished()
	} else {
		src, _ = s.Current()
	}
	last := s.live.Add(-1) == 0
	failed = failed || (s.answered.Load() && ((!last && engine.ResetUnread(src)) || s.ResetTaken(src)))
	switch {
	case failed && !s.IsClosed():
		s.AbortSockets()
	case failed || last:
		s.CloseSockets()
	default:
		dst.CloseWrite()
		go plainWatchForReset(s, src)
	}
	if last {
		s.End()
	}
}

// plainWatchForReset waits in Go's poller for a reset of a source read to
// its end (its SO_ERROR) and aborts the connection; the session's close
// ends the wait.
func plainWatchForReset(s *plainConn, src socket) {
	raw, err := src.SyscallConn()
	if err != nil {
		return
	}
	reset := false
	err = raw.Read(func(fd uintptr) bool {
		soErr, gerr := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		reset = gerr == nil && soErr != 0
		return reset || gerr != nil
	})
	if err == nil && reset {
		s.AbortSockets()
	}
}

// engines are the relays every session test runs against.
var engines = []struct {
	name  string
	plain bool
}{{"parked", false}, {"plain", true}}

// eachEngine runs test against the parked relay and the plain one, as
// subtests named after them.
func eachEngine(t *testing.T, test func(t *testing.T, plain bool)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { test(t, e.plain) })
	}
}

// usePlain makes p relay with the plain engine if plain; call it before
// p.Start.
func usePlain(p *Proxy, plain bool) *Proxy {
	if plain {
		p.engine = plainEngine{}
	}
	return p
}
