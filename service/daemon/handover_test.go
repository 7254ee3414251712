package daemon_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/activation"
	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/notify"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// tcpBackend is a plain TCP backend that greets each client connection
// (after its "hello N" line) with "ok N" and keeps it, by N, for the
// test to drive. The health checks' connections send nothing and are
// dropped.
type tcpBackend struct {
	name  string
	ln    net.Listener
	mu    sync.Mutex
	conns map[int]*bufConn
}

// bufConn is a connection with the reader its first line came through.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func newTCPBackend(t *testing.T, name string) *tcpBackend {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpBackend{name: name, ln: ln, conns: map[int]*bufConn{}}
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	go b.serve()
	return b
}

func (b *tcpBackend) addr() string { return b.ln.Addr().String() }

func (b *tcpBackend) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.greet(c)
	}
}

func (b *tcpBackend) greet(c net.Conn) {
	bc := &bufConn{Conn: c, r: bufio.NewReader(c)}
	var n int
	line, err := bc.r.ReadString('\n')
	if _, serr := fmt.Sscanf(line, "hello %d", &n); err != nil || serr != nil {
		c.Close() // a health check
		return
	}
	b.mu.Lock()
	b.conns[n] = bc
	b.mu.Unlock()
	fmt.Fprintf(c, "ok %d\n", n)
}

func (b *tcpBackend) conn(n int) *bufConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[n]
}

// pairConn is one client connection through the VIP and where it went.
type pairConn struct {
	n       int
	client  *bufConn
	backend *bufConn
	on      string // the backend's name
}

// dialPairs opens n connections through vip and waits until each has
// been greeted by its backend (so the backend has answered: nothing is
// kept for a replay).
func dialPairs(t *testing.T, vip string, n int, backends ...*tcpBackend) []*pairConn {
	t.Helper()
	var out []*pairConn
	for i := range n {
		c, err := net.Dial("tcp4", vip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bc := &bufConn{Conn: c, r: bufio.NewReader(c)}
		fmt.Fprintf(c, "hello %d\n", i)
		c.SetReadDeadline(time.Now().Add(testutil.Scaled(10 * time.Second)))
		if line, err := bc.r.ReadString('\n'); err != nil || line != fmt.Sprintf("ok %d\n", i) {
			t.Fatalf("connection %d: greeting %q, %v", i, line, err)
		}
		c.SetReadDeadline(time.Time{})
		p := &pairConn{n: i, client: bc}
		testutil.WaitFor(t, "the backend side of a connection", func() bool {
			for _, b := range backends {
				if p.backend = b.conn(i); p.backend != nil {
					p.on = b.name
					return true
				}
			}
			return false
		})
		out = append(out, p)
	}
	return out
}

// stream is a transfer of size pseudo-random bytes from w to r, r read
// slowly (64 KiB every 5 ms) so that it is still under way when the
// daemon hands over; both ends hash what they saw.
type stream struct {
	size         int64
	read         atomic.Int64
	sent, got    [sha256.Size]byte
	sentN, gotN  int64
	werr, rerr   error
	wdone, rdone chan struct{}
}

func startStream(w io.Writer, r io.Reader, size int64, seed uint64) *stream {
	s := &stream{size: size, wdone: make(chan struct{}), rdone: make(chan struct{})}
	go func() {
		defer close(s.wdone)
		h := sha256.New()
		src := rand.NewChaCha8([32]byte{byte(seed)})
		buf := make([]byte, 32<<10)
		for s.sentN < size {
			src.Read(buf)
			n, err := w.Write(buf[:min(int64(len(buf)), size-s.sentN)])
			h.Write(buf[:n])
			s.sentN += int64(n)
			if err != nil {
				s.werr = err
				break
			}
		}
		copy(s.sent[:], h.Sum(nil))
	}()
	go func() {
		defer close(s.rdone)
		h := sha256.New()
		buf := make([]byte, 64<<10)
		for s.gotN < size {
			n, err := r.Read(buf[:min(int64(len(buf)), size-s.gotN)])
			h.Write(buf[:n])
			s.gotN += int64(n)
			s.read.Store(s.gotN)
			if err != nil {
				s.rerr = err
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		copy(s.got[:], h.Sum(nil))
	}()
	return s
}

// check waits for the stream to end and wants every byte, unchanged.
func (s *stream) check(t *testing.T, what string) {
	t.Helper()
	for _, done := range []chan struct{}{s.wdone, s.rdone} {
		select {
		case <-done:
		case <-time.After(testutil.Scaled(60 * time.Second)):
			t.Fatalf("%s: stream stuck at %d of %d bytes", what, s.read.Load(), s.size)
		}
	}
	if s.werr != nil || s.rerr != nil {
		t.Fatalf("%s: write error %v, read error %v after %d of %d bytes", what, s.werr, s.rerr, s.gotN, s.size)
	}
	if s.gotN != s.size || s.sent != s.got {
		t.Errorf("%s: %d of %d bytes arrived, sha256 sent %x, received %x", what, s.gotN, s.size, s.sent[:8], s.got[:8])
	}
}

// startWithFiles starts vipproxy on the socket-activated listener f and
// the descriptors a file descriptor store passes after it, with a
// RUNTIME_DIRECTORY of its own for the control socket, as the unit has.
func startWithFiles(t *testing.T, s settings, env []string, f *os.File, files []*os.File, names []string) *proc {
	t.Helper()
	return startProcWithFiles(t, newProc(t, s), env, f, files, names)
}

// startProcWithFiles is startWithFiles for a daemon whose config newProc
// wrote.
func startProcWithFiles(t *testing.T, p *proc, env []string, f *os.File, files []*os.File, names []string) *proc {
	t.Helper()
	p.cmd = exec.Command(filepath.Join(binDir, "vipproxy"), "serve", "--config", p.cfgPath)
	p.cmd.Env = append(append(os.Environ(), runtimeDir(t)...), env...)
	activation.PassFiles(p.cmd, append([]*os.File{f}, files...), append([]string{"vip"}, names...))
	p.start()
	for _, f := range files {
		f.Close() // the daemon has its own now, as the store has
	}
	p.waitFor(func() bool { return p.status().Ready }, "ready")
	return p
}

// stopFor stops p as systemd does for a job of that type: ExecStop=+
// (`vipproxy prestop`, told the job that systemd would name over
// D-Bus), then SIGTERM; it waits for the exit and returns what
// prestop printed.
func (p *proc) stopFor(job string) string {
	p.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "vipproxy"), "prestop", "--config", p.cfgPath,
		"--pid="+strconv.Itoa(p.cmd.Process.Pid), "--job", job, "--control", p.controlSocket()).CombinedOutput()
	if err != nil {
		p.t.Fatalf("vipproxy prestop --job %s: %v\n%s", job, err, out)
	}
	p.stop()
	return string(out)
}

// controlSocket is the control socket of p, started by startWithFiles.
func (p *proc) controlSocket() string {
	for _, e := range p.cmd.Env {
		if d, ok := strings.CutPrefix(e, "RUNTIME_DIRECTORY="); ok {
			return filepath.Join(d, "control.sock")
		}
	}
	p.t.Fatal("a daemon started without RUNTIME_DIRECTORY has no control socket")
	return ""
}

// startStored starts a daemon with a file descriptor store of max
// descriptors (testutil.FDStore, standing in for systemd's) and the VIP
// listener systemd keeps across restarts. next starts the daemon that
// follows with s on an admin port of its own, handed what the store holds.
func startStored(t *testing.T, s settings, max int) (first *proc, store *testutil.FDStore, next func(settings) *proc) {
	t.Helper()
	store = testutil.NewFDStore(t, max)
	f, err := activation.Socket(context.Background(), s.Port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	next = func(s settings) *proc {
		t.Helper()
		s.Admin = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		files, names := store.Files()
		return startWithFiles(t, s, store.Env(), f, files, names)
	}
	return startWithFiles(t, s, store.Env(), f, nil, nil), store, next
}

// A restart through the file descriptor store (systemd's, stood in for
// by testutil.FDStore): every connection open at SIGTERM is handed to the
// next daemon and goes on byte for byte, both ways, one of them in the
// middle of a transfer each way; the connections to a backend the new
// config no longer has are closed. The new daemon takes every pair out
// of the store before relaying.
func TestRestartHandsConnectionsOver(t *testing.T) {
	a, b := newTCPBackend(t, "b0"), newTCPBackend(t, "b1")
	s := newSettings(t, a.addr(), b.addr())
	s.DrainIdle = "0s"
	first, store, next := startStored(t, s, 4096)
	pairs := dialPairs(t, first.vip, 8, a, b)
	var onA []*pairConn
	for _, p := range pairs {
		if p.on == "b0" {
			onA = append(onA, p)
		}
	}
	if len(onA) == 0 || len(onA) == len(pairs) {
		t.Fatalf("round robin put %d of %d connections on b0; want some on each", len(onA), len(pairs))
	}
	// A connection whose backend has not answered (its first bytes would
	// be kept for a replay) is not handed over but closed.
	silent, err := net.Dial("tcp4", first.vip)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	first.waitFor(func() bool { return first.status().OpenConnections == int64(len(pairs)+1) }, "the silent connection counted")
	const size = 48 << 20
	up := startStream(onA[0].client, onA[0].backend, size, 1)
	down := startStream(onA[0].backend, onA[0].client, size, 2)
	testutil.WaitFor(t, "both streams under way", func() bool { return up.read.Load() > 1<<20 && down.read.Load() > 1<<20 })

	if out := first.stopFor("restart"); !strings.Contains(out, "hands its connections over") {
		t.Errorf("prestop said %q, want the handover", out)
	}
	if up.read.Load() == size || down.read.Load() == size {
		t.Fatal("a stream ended before the handover: nothing was mid-transfer")
	}
	testutil.WaitFor(t, "the handover logged", func() bool {
		return strings.Contains(first.log.String(), `handed connections over to the next start" handed_over=8 closed=1 reasons="replay_window=1"`)
	})
	// One bundle for all: systemd's cost grows with the square of what
	// its store holds.
	held := store.Held()
	if len(held) != 1 || held[0] != "pairs.0" {
		t.Fatalf("the store holds %q, want one bundle of the %d connections\n%s", held, len(pairs), first.log.String())
	}

	// The next start, with b1 gone from the config.
	s.Backends = s.Backends[:1]
	second := next(s)
	second.waitLog("resumed the connections the previous daemon handed over")
	testutil.WaitFor(t, "every pair out of the store", func() bool { return len(store.Held()) == 0 })
	if got := store.Removed(); !slices.Equal(got, held) {
		t.Errorf("FDSTOREREMOVE for %q, want %q", got, held)
	}

	up.check(t, "client to backend")
	down.check(t, "backend to client")
	for _, p := range pairs {
		if p == onA[0] {
			continue
		}
		if p.on == "b0" {
			pingPong(t, p)
		} else {
			wantClosed(t, p)
		}
	}
	wantClosed(t, &pairConn{n: -1, client: &bufConn{Conn: silent, r: bufio.NewReader(silent)}, backend: &bufConn{Conn: silent, r: bufio.NewReader(silent)}, on: "no backend yet"})
	st, err := second.handoverStatus()
	if err != nil || st.Resumed != len(onA) || st.Closed["backend_gone"] != len(pairs)-len(onA) {
		t.Errorf("/status handover = %+v (%v), want %d resumed, %d closed as backend_gone", st, err, len(onA), len(pairs)-len(onA))
	}
	log := second.log.String()
	if want := fmt.Sprintf(`resumed=%d closed="backend_gone=%d"`, len(onA), len(pairs)-len(onA)); !strings.Contains(log, want) {
		t.Errorf("the new daemon's log lacks %q:\n%s", want, log)
	}
	metrics, _ := second.get("/metrics")
	if !strings.Contains(metrics, fmt.Sprintf(`vipproxy_handover_pairs_total{outcome="resumed",reason=""} %d`, len(onA))) {
		t.Errorf("metrics lack the resumed pairs:\n%s", grepLines(metrics, "handover"))
	}
}

// pingPong wants a resumed connection to carry a message each way.
func pingPong(t *testing.T, p *pairConn) {
	t.Helper()
	for _, dir := range [][2]*bufConn{{p.client, p.backend}, {p.backend, p.client}} {
		msg := fmt.Sprintf("ping %d\n", p.n)
		if _, err := dir[0].Write([]byte(msg)); err != nil {
			t.Fatalf("connection %d: write: %v", p.n, err)
		}
		dir[1].SetReadDeadline(time.Now().Add(testutil.Scaled(10 * time.Second)))
		if line, err := dir[1].r.ReadString('\n'); err != nil || line != msg {
			t.Errorf("connection %d: got %q, %v; want %q", p.n, line, err, msg)
		}
	}
}

// wantClosed wants both ends of a connection to see it closed.
func wantClosed(t *testing.T, p *pairConn) {
	t.Helper()
	for _, c := range []*bufConn{p.client, p.backend} {
		c.SetReadDeadline(time.Now().Add(testutil.Scaled(10 * time.Second)))
		if n, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
			t.Errorf("connection %d to %s: read %d bytes, %v; want it closed", p.n, p.on, n, err)
		}
	}
}

// A daemon killed while relaying (SIGKILL, OOM) stores nothing: its
// connections end with it, and the next daemon is handed no pair whose
// bytes in flight were lost with the process.
func TestKilledDaemonLeavesNoPairs(t *testing.T) {
	a := newTCPBackend(t, "b0")
	s := newSettings(t, a.addr())
	first, store, next := startStored(t, s, 4096)
	pairs := dialPairs(t, first.vip, 3, a)
	up := startStream(pairs[0].client, pairs[0].backend, 48<<20, 3)
	testutil.WaitFor(t, "the stream under way", func() bool { return up.read.Load() > 1<<20 })
	first.signal(syscall.SIGKILL)
	<-first.exited
	if held := store.Held(); len(held) != 0 {
		t.Fatalf("a killed daemon left %q in the store", held)
	}
	second := next(s)
	for _, p := range pairs[1:] {
		wantClosed(t, p)
	}
	if strings.Contains(second.log.String(), "resumed") {
		t.Errorf("the daemon after a kill resumed connections:\n%s", second.log.String())
	}
	dialPairs(t, second.vip, 1, a) // and serves new ones
}

// The shipped unit's store takes both sockets of as many connections as
// the cap its LimitNOFILE= gives allows, and tells the daemon its size
// ($FDSTORE, which systemd < 254 does not set).
func TestUnitStoreHoldsEveryConnection(t *testing.T) {
	unit, err := os.ReadFile("../../systemd/vipproxy.service")
	if err != nil {
		t.Fatal(err)
	}
	value := func(re string) int {
		m := regexp.MustCompile(`(?m)^` + re + `=(\d+)$`).FindSubmatch(unit)
		if m == nil {
			t.Fatalf("systemd/vipproxy.service has no %s=", re)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	nofile, storeMax, env := value("LimitNOFILE"), value("FileDescriptorStoreMax"), value("Environment=FDSTORE")
	if env != storeMax {
		t.Errorf("Environment=FDSTORE=%d, FileDescriptorStoreMax=%d: want the same", env, storeMax)
	}
	if need := 2 * proxy.DerivedMaxConnections(uint64(nofile), 0, 0); storeMax < need {
		t.Errorf("FileDescriptorStoreMax=%d holds fewer than the %d descriptors of the connection cap at LimitNOFILE=%d", storeMax, need, nofile)
	}
}

// A store that holds fewer descriptors than the connections need ($FDSTORE,
// FileDescriptorStoreMax=) takes as many pairs as fit; the rest are closed
// and counted as store_full, and the next daemon resumes those stored.
func TestHandoverStoreFull(t *testing.T) {
	a := newTCPBackend(t, "b0")
	s := newSettings(t, a.addr())
	first, _, next := startStored(t, s, 4) // two pairs
	pairs := dialPairs(t, first.vip, 3, a)
	first.stopFor("restart")
	testutil.WaitFor(t, "the handover logged", func() bool {
		return strings.Contains(first.log.String(), `handed_over=2 closed=1 reasons="store_full=1"`)
	})
	next(s)
	resumed := 0
	for _, p := range pairs {
		p.client.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := p.client.Read(make([]byte, 1)); os.IsTimeout(err) {
			pingPong(t, p) // still open: it must carry messages
			resumed++
		}
	}
	if resumed != 2 {
		t.Errorf("%d connections resumed, want 2", resumed)
	}
}

// A stop drains even where a store exists, and so does a SIGTERM that
// nothing announced (a kill by hand, a unit without ExecStop=): systemd
// empties the store when the unit stops, so handed-over connections would
// all be closed, a busy transfer cut. Drained, the busy stream finishes
// byte for byte, the idle connections are closed after
// timeouts.drain_idle, and the store is handed nothing.
func TestStopDrainsWithStore(t *testing.T) {
	for _, job := range []string{"stop", "none"} {
		t.Run(job, func(t *testing.T) {
			a := newTCPBackend(t, "b0")
			s := newSettings(t, a.addr())
			s.DrainIdle = "1s"
			store := testutil.NewFDStore(t, 4096)
			f, err := activation.Socket(context.Background(), s.Port)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p := newProc(t, s)
			// Room for the busy stream on a loaded machine: drain fails
			// only on a hang.
			p.rewriteFile(strings.Replace(s.toml(), `drain = "5s"`, `drain = "120s"`, 1))
			startProcWithFiles(t, p, store.Env(), f, nil, nil)
			pairs := dialPairs(t, p.vip, 3, a)
			const size = 16 << 20
			up := startStream(pairs[0].client, pairs[0].backend, size, 4)
			testutil.WaitFor(t, "the stream under way", func() bool { return up.read.Load() > 1<<20 })
			if job == "stop" {
				if out := p.stopFor("stop"); !strings.Contains(out, "drains its connections") {
					t.Errorf("prestop said %q, want a drain", out)
				}
			} else {
				p.stop()
			}
			up.check(t, "the busy stream, drained")
			for _, c := range pairs[1:] {
				wantClosed(t, c)
			}
			if held := store.Held(); len(held) != 0 {
				t.Errorf("a stop stored %q", held)
			}
			log := p.log.String()
			for _, want := range []string{"connections drain: they are not handed over", "stopping: no longer accepting, draining", `msg=drained`} {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, "handing connections over") {
				t.Errorf("a %s handed connections over:\n%s", job, log)
			}
		})
	}
}

// rewriteFile replaces the config file of a daemon not started yet.
func (p *proc) rewriteFile(content string) {
	p.t.Helper()
	if err := os.WriteFile(p.cfgPath, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// A client that sent its request and half-closed (its FIN passed on to
// the backend) while the answer streams back is handed over like any
// pair: the next daemon reads the client's end again, relays the rest of
// the answer byte for byte, and passes the backend's end on.
func TestHalfClosedClientHandedOver(t *testing.T) {
	a := newTCPBackend(t, "b0")
	s := newSettings(t, a.addr())
	store := testutil.NewFDStore(t, 4096)
	f, err := activation.Socket(context.Background(), s.Port)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := startWithFiles(t, s, store.Env(), f, nil, nil)
	p := dialPairs(t, first.vip, 1, a)[0]
	if err := p.client.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p.backend.SetReadDeadline(time.Now().Add(testutil.Scaled(10 * time.Second)))
	if n, err := p.backend.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the backend read %d bytes, %v; want the client's end", n, err)
	}
	p.backend.SetReadDeadline(time.Time{})
	const size = 32 << 20
	down := startStream(p.backend, p.client, size, 5)
	testutil.WaitFor(t, "the answer under way", func() bool { return down.read.Load() > 1<<20 })

	first.stopFor("restart")
	if down.read.Load() == size {
		t.Fatal("the answer ended before the handover")
	}
	testutil.WaitFor(t, "the handover logged", func() bool {
		return strings.Contains(first.log.String(), `handed connections over to the next start" handed_over=1 closed=0`)
	})
	s.Admin = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	files, names := store.Files()
	second := startWithFiles(t, s, store.Env(), f, files, names)
	second.waitLog("resumed the connections the previous daemon handed over")
	down.check(t, "the answer to a half-closed client")
	p.backend.Close()
	p.client.SetReadDeadline(time.Now().Add(testutil.Scaled(10 * time.Second)))
	if n, err := p.client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the answer the client read %d bytes, %v; want the backend's end", n, err)
	}
	second.waitFor(func() bool { return second.status().OpenConnections == 0 }, "the finished connection no longer counted")
}

// A store that stops taking bundles partway (a hung service manager:
// the datagrams queue until the socket's queue is full, then the sends
// time out): the pairs sent before are handed over, the rest are drained
// (idle ones closed after timeouts.drain_idle), none is relayed by both
// daemons, and the counts add up: the old daemon's journal, the new
// one's /status and metrics.
func TestHandoverStoreFailsPartway(t *testing.T) {
	qlen := 10
	if b, err := os.ReadFile("/proc/sys/net/unix/max_dgram_qlen"); err == nil {
		qlen, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if qlen > 64 {
		t.Skipf("net.unix.max_dgram_qlen is %d: the store's queue would take more bundles than this test makes connections for", qlen)
	}
	// More bundles than the store takes (1) and its queue holds, and some.
	perBundle := notify.BundleMax / 2
	n := (1+qlen+2)*perBundle + perBundle/2
	a := newTCPBackend(t, "b0")
	s := newSettings(t, a.addr())
	s.DrainIdle = "1s"
	store := testutil.NewFDStore(t, 4*n)
	store.StallAfter(1) // one bundle
	f, err := activation.Socket(context.Background(), s.Port)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := startWithFiles(t, s, store.Env(), f, nil, nil)
	pairs := dialPairs(t, first.vip, n, a)
	go func() {
		// The manager recovers once the daemon gave up on the store: the
		// queued datagrams reach it, and the drain's STOPPING=1 too (a
		// manager that stays hung holds that up until TimeoutStopSec=).
		defer store.Unstall()
		for range 6000 { // up to 10 minutes: only a hang
			if strings.Contains(first.log.String(), "the file descriptor store refused a connection") {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	first.stopFor("restart")
	m := regexp.MustCompile(`refused a connection; draining the rest" handed_over=(\d+) draining=(\d+) closed="?([^" ]*)"?`).FindStringSubmatch(first.log.String())
	if m == nil {
		t.Fatalf("the old daemon did not say that the store failed:\n%s", first.log.String())
	}
	handed, _ := strconv.Atoi(m[1])
	draining, _ := strconv.Atoi(m[2])
	if handed+draining != n || draining == 0 || handed == 0 || m[3] != "" {
		t.Fatalf("handed over %d, draining %d, closed %q of %d connections: want all counted, some handed over, some drained, none closed", handed, draining, m[3], n)
	}
	if !strings.Contains(first.log.String(), "msg=drained") {
		t.Errorf("the rest did not drain:\n%s", first.log.String())
	}

	testutil.WaitFor(t, "the store holds what was sent", func() bool { return len(store.Held())*perBundle >= handed })
	s.Admin = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	files, names := store.Files()
	second := startWithFiles(t, s, store.Env(), f, files, names)
	second.waitLog("resumed the connections the previous daemon handed over")
	// All at once: an open connection's read times out, a closed one's
	// ends at once.
	open := make([]bool, len(pairs))
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Go(func() {
			p.client.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := p.client.Read(make([]byte, 1))
			open[i] = os.IsTimeout(err)
		})
	}
	wg.Wait()
	resumed := 0
	for i, p := range pairs {
		if open[i] {
			pingPong(t, p) // handed over, and it must carry messages
			resumed++
		} else {
			wantClosed(t, p)
		}
	}
	if resumed != handed {
		t.Errorf("%d connections resumed, the old daemon handed over %d", resumed, handed)
	}
	st, err := second.handoverStatus()
	if err != nil || st.Resumed != handed || len(st.Closed) != 0 {
		t.Errorf("/status handover = %+v (%v), want %d resumed and none closed", st, err, handed)
	}
	metrics, _ := second.get("/metrics")
	if !strings.Contains(metrics, fmt.Sprintf(`vipproxy_handover_pairs_total{outcome="resumed",reason=""} %d`, handed)) {
		t.Errorf("metrics lack the %d resumed pairs:\n%s", handed, grepLines(metrics, "handover"))
	}
}

// handoverCounts is /status's handover: what a daemon resumed and closed
// of what the previous one handed over.
type handoverCounts struct {
	Resumed int            `json:"resumed"`
	Closed  map[string]int `json:"closed"`
}

// handoverStatus reads p's /status handover.
func (p *proc) handoverStatus() (handoverCounts, error) {
	var st struct {
		Handover handoverCounts `json:"handover"`
	}
	body, err := p.get("/status")
	if err != nil {
		return st.Handover, err
	}
	return st.Handover, json.Unmarshal([]byte(body), &st)
}
