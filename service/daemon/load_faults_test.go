package daemon_test

// Helpers of the fault suite (faults_test.go) and the soak (soak_test.go):
// a client load that keeps every request's outcome, a fault injector that
// sits in front of a healthy backend and can turn it bad at any moment,
// and a raw TCP echo backend run as its own process.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// sample is one client request: when it started, when it ended, and how.
type sample struct {
	start, end time.Time
	err        error
}

// clientLoad runs request from a few workers until stopped, keeping every
// outcome, so a test can judge each one against the moment of a fault.
type clientLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []sample
}

// startClientLoad starts workers that each call request in a loop with a
// 5 ms pause, at most 5,000 times each.
func startClientLoad(t testing.TB, workers int, request func() error) *clientLoad {
	return startClientLoadN(t, workers, 5000, request)
}

// startClientLoadN is startClientLoad with at most limit calls per worker.
func startClientLoadN(t testing.TB, workers, limit int, request func() error) *clientLoad {
	l := &clientLoad{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < limit; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				s := sample{start: time.Now()}
				s.err = request()
				s.end = time.Now()
				l.mu.Lock()
				l.samples = append(l.samples, s)
				l.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

func (l *clientLoad) halt() {
	testutil.CloseOnce(l.stop)
	l.wg.Wait()
}

// finish stops the load and returns every outcome.
func (l *clientLoad) finish() []sample {
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.samples)
}

// tally sums up outcomes. A failure counts as "in flight" when the request
// started before the fault (a connection already bound to a backend that
// dies ends, as it must), and as failed otherwise.
type tally struct {
	ok, inFlight, failed, refused int
	maxOK                         time.Duration // slowest successful request
	firstErr                      error
	lastFailedStart               time.Time
}

func count(samples []sample, fault time.Time) tally {
	var t tally
	for _, s := range samples {
		switch {
		case s.err == nil:
			t.ok++
			t.maxOK = max(t.maxOK, s.end.Sub(s.start))
		case !fault.IsZero() && s.start.Before(fault):
			t.inFlight++
		default:
			t.failed++
			if errors.Is(s.err, syscall.ECONNREFUSED) {
				t.refused++
			}
			if t.firstErr == nil {
				t.firstErr = s.err
			}
			if s.start.After(t.lastFailedStart) {
				t.lastFailedStart = s.start
			}
		}
	}
	return t
}

func (t tally) String() string {
	return fmt.Sprintf("%d ok (slowest %v), %d failed that were in flight at the fault, %d failed new (%d refused)",
		t.ok, t.maxOK.Round(time.Millisecond), t.inFlight, t.failed, t.refused)
}

// mtlsRequest is one /name request over a new mTLS connection to vip.
func mtlsRequest(t testing.TB, vip string) func() error {
	c := mtlsClient(t, true)
	return func() error { _, err := name(c, vip); return err }
}

// Fault modes of a front.
const (
	modePass  int32 = iota // relay to the real backend
	modeReset              // accept, then reset (SO_LINGER 0)
	modeHang               // accept, never read or write
	modeSlow               // relay, but wait before every chunk of answer
	modeFIN                // accept, half-close at once, never answer
)

// front is a fault injector: a TCP listener in front of a real backend
// that relays faithfully until told to misbehave. The mode applies to
// connections accepted from then on; health checks go through it too.
type front struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	delay  time.Duration // modeSlow: pause before each chunk of answer

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newFront(t testing.TB, target string, slowDelay time.Duration) *front {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln, target: target, delay: slowDelay, conns: map[net.Conn]struct{}{}}
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *front) Addr() string       { return f.ln.Addr().String() }
func (f *front) setMode(mode int32) { f.mode.Store(mode) }

func (f *front) close() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// track remembers c so that close ends it; false once the front is closed.
func (f *front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *front) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		tc := c.(*net.TCPConn)
		switch f.mode.Load() {
		case modeReset:
			tc.SetLinger(0)
			tc.Close()
		case modeHang:
			if !f.track(tc) {
				tc.Close()
			}
		case modeFIN:
			tc.CloseWrite()
			go func() { io.Copy(io.Discard, tc); tc.Close() }()
		case modeSlow:
			go f.relay(tc, f.delay)
		default:
			go f.relay(tc, 0)
		}
	}
}

// relay copies both ways, passing half-closes on; delay > 0 pauses before
// each chunk sent back to the client.
func (f *front) relay(c *net.TCPConn, delay time.Duration) {
	b, err := net.DialTimeout("tcp", f.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	be := b.(*net.TCPConn)
	if !f.track(c) || !f.track(be) {
		c.Close()
		be.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(be, c)
		be.CloseWrite()
		close(done)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := be.Read(buf)
		if n > 0 {
			time.Sleep(delay)
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.CloseWrite()
	<-done
	c.Close()
	be.Close()
}

// measureState polls /status until backend name is in state want and
// returns how long that took from since (bounded by waitFor's 15 s).
func measureState(p *proc, name, want string, since time.Time) time.Duration {
	p.t.Helper()
	p.waitState(name, want)
	return time.Since(since)
}

// echoPackage is the raw TCP echo backend (testdata/echo), for testutil.Build.
const echoPackage = "github.com/vipproxy/vipproxy/service/daemon/testdata/echo"

// echoProc is an echo backend process.
type echoProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// startEcho runs the echo backend on addr and waits until it accepts.
func startEcho(t testing.TB, bin, addr string) *echoProc {
	t.Helper()
	e := &echoProc{cmd: exec.Command(bin, "-listen", addr), addr: addr, done: make(chan struct{})}
	e.cmd.Stderr = os.Stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.cmd.Wait(); close(e.done) }()
	t.Cleanup(e.kill)
	for i := 0; i < 250; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return e
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("echo backend did not listen on %s", addr)
	return nil
}

// kill SIGKILLs the backend and waits for it to be gone.
func (e *echoProc) kill() {
	e.cmd.Process.Kill()
	<-e.done
}

// echoOnce sends one line over a new connection to addr and checks that
// it comes back.
func echoOnce(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	return echoLine(c, bufio.NewReader(c), "hello "+strconv.Itoa(int(time.Now().UnixNano())))
}

// echoLine writes msg and a newline to c and reads the same line back.
func echoLine(c net.Conn, r *bufio.Reader, msg string) error {
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if strings.TrimSuffix(got, "\n") != msg {
		return fmt.Errorf("echo %q, sent %q", got, msg)
	}
	return nil
}

// metricValues reads plain (label-less or first-series) values of the
// named metrics from /metrics.
func (p *proc) metricValues(names ...string) (map[string]float64, error) {
	body, err := p.get("/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		if slices.Contains(names, fields[0]) {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", fields[0], err)
			}
			out[fields[0]] = v
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics lacks %s", n)
		}
	}
	return out, nil
}
