package daemon_test

// The soak (make soak, SOAK_DURATION): minutes of mixed load through the
// real binary with a backend SIGKILLed and restarted and a reload every
// few seconds, then the load stops and vipproxy's goroutines, descriptors
// and memory, read from its own /metrics, must come back near where they
// started. Not part of make test.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

const soakEnv = "VIPPROXY_SOAK_DURATION"

// The runtime figures watched for leaks.
var soakMetrics = []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"}

// Leaks tolerated at the end: a few goroutines and descriptors of the
// admin endpoint and health checks that happen to be running, and memory
// the Go runtime has not yet given back.
const (
	soakSpareGoroutines = 10
	soakSpareFDs        = 5
	soakSpareRSS        = 32 << 20
	// The proxy keeps up to 256 idle pipes for splice (service/proxy,
	// pipes.go): a bounded cache, not a leak.
	soakMaxPooledPipeFDs = 2 * 256
)

func TestSoak(t *testing.T) {
	v := os.Getenv(soakEnv)
	if v == "" {
		t.Skipf("the soak runs with make soak (%s=3m)", soakEnv)
	}
	duration, err := time.ParseDuration(v)
	if err != nil || duration <= 0 {
		t.Fatalf("%s=%q: want a duration such as 3m", soakEnv, v)
	}
	bin := testutil.Build(t, echoPackage)
	var backends []*echoProc
	var addrs []string
	for i := 0; i < 3; i++ {
		e := startEcho(t, bin, fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)))
		backends = append(backends, e)
		addrs = append(addrs, e.addr)
	}
	s := newSettings(t, addrs...)
	p := startVIPProxy(t, s, nil)
	for _, b := range []string{"b0", "b1", "b2"} {
		p.waitState(b, "up")
	}
	time.Sleep(time.Second)
	start := soakSample(t, p)
	startFDs := fdKinds(t, p.cmd.Process.Pid)
	peak := watchPeak(t, p, start)

	perWorker := int(duration/(5*time.Millisecond)) + 1
	short := startClientLoadN(t, 4, perWorker, func() error { return echoOnce(p.vip, 5*time.Second) })
	streams := startStreams(t, p.vip, 50)
	bulk := startBulk(t, p.vip, 2, 4<<20)

	faults := soakFaults(t, p, s, bin, backends, duration)

	shortSamples := short.finish()
	streams.finish()
	bulk.finish()
	peakValues := peak.finish()
	p.waitFor(func() bool { return p.status().OpenConnections == 0 }, "every connection closed after the load")
	var end, endFDs map[string]float64
	settled := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		end = soakSample(t, p)
		endFDs = fdKinds(t, p.cmd.Process.Pid)
		if end["go_goroutines"] <= start["go_goroutines"]+soakSpareGoroutines && endFDs["socket"] <= startFDs["socket"]+soakSpareFDs || time.Now().After(deadline) {
			break
		}
	}

	ok, inFlight, failed, firstErr := shortOutcomes(shortSamples, faults)
	t.Logf("soak of %v: %d backend kills and restarts, %d reloads", duration, len(faults), len(faults))
	t.Logf("new connections: %d ok, %d cut by a backend kill while open, %d failed (first: %v)", ok, inFlight, failed, firstErr)
	t.Logf("long streams: %d lines echoed, %d streams cut and reopened, %d of them more than 2 s after a kill",
		streams.lines.Load(), streams.breaks.Load(), streams.unexplained(faults))
	t.Logf("bulk: %d transfers of 4 MiB each way ok, %d cut by a backend kill", bulk.ok.Load(), bulk.cut.Load())
	t.Logf("%-32s %12s %12s %12s", "vipproxy (from /metrics)", "start", "peak", "end")
	for _, m := range soakMetrics {
		t.Logf("%-32s %12s %12s %12s", m, human(m, start[m]), human(m, peakValues[m]), human(m, end[m]))
	}
	for _, kind := range []string{"socket", "pipe", "other"} {
		t.Logf("%-32s %12.0f %12s %12.0f", "descriptors: "+kind, startFDs[kind], "", endFDs[kind])
	}
	t.Logf("end measured %v after the load stopped", time.Since(settled).Round(time.Second))

	if failed > 0 {
		t.Errorf("%d new connections failed outside a backend kill (first: %v)", failed, firstErr)
	}
	if n := streams.unexplained(faults); n > 0 {
		t.Errorf("%d long streams broke without a backend kill", n)
	}
	if ok == 0 || streams.lines.Load() == 0 || bulk.ok.Load() == 0 {
		t.Error("part of the load never succeeded")
	}
	if end["go_goroutines"] > start["go_goroutines"]+soakSpareGoroutines {
		t.Errorf("goroutines: %v at the start, %v after the load: a leak", start["go_goroutines"], end["go_goroutines"])
	}
	if endFDs["socket"] > startFDs["socket"]+soakSpareFDs || endFDs["other"] > startFDs["other"]+soakSpareFDs {
		t.Errorf("open descriptors: %v at the start, %v after the load: a leak", startFDs, endFDs)
	}
	if endFDs["pipe"] > startFDs["pipe"]+soakMaxPooledPipeFDs {
		t.Errorf("pipes: %v at the start, %v after the load: more than the pool keeps", startFDs["pipe"], endFDs["pipe"])
	}
	if end["process_resident_memory_bytes"] > 2*start["process_resident_memory_bytes"]+soakSpareRSS {
		t.Errorf("resident memory: %s at the start, %s after the load: a leak",
			human("process_resident_memory_bytes", start["process_resident_memory_bytes"]), human("process_resident_memory_bytes", end["process_resident_memory_bytes"]))
	}
}

func soakSample(t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	v, err := p.metricValues(soakMetrics...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fdKinds counts the open descriptors of pid by kind (socket, pipe, other).
func fdKinds(t *testing.T, pid int) map[string]float64 {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list descriptors: %v", err)
	}
	kinds := map[string]float64{"socket": 0, "pipe": 0, "other": 0}
	for _, e := range entries {
		target, err := os.Readlink(dir + "/" + e.Name())
		switch {
		case err != nil:
			continue // closed meanwhile
		case strings.HasPrefix(target, "socket:"):
			kinds["socket"]++
		case strings.HasPrefix(target, "pipe:"):
			kinds["pipe"]++
		default:
			kinds["other"]++
		}
	}
	return kinds
}

func human(metric string, v float64) string {
	if metric == "go_goroutines" || metric == "process_open_fds" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f MiB", v/(1<<20))
}

// soakFaults injects faults until duration has passed, in 10 s rounds:
// SIGKILL one backend, restart it 3 s later, reload 3 s after that. It
// returns the kill times.
func soakFaults(t *testing.T, p *proc, s settings, bin string, backends []*echoProc, duration time.Duration) []time.Time {
	var kills []time.Time
	end := time.Now().Add(duration)
	for round := 0; time.Now().Before(end); round++ {
		time.Sleep(min(2*time.Second, time.Until(end)))
		if time.Until(end) < 8*time.Second {
			time.Sleep(time.Until(end))
			break
		}
		i := round % len(backends)
		kills = append(kills, time.Now())
		backends[i].kill()
		time.Sleep(3 * time.Second)
		backends[i] = startEcho(t, bin, backends[i].addr)
		time.Sleep(3 * time.Second)
		next := s
		if round%2 == 0 {
			next.Interval = "250ms"
		}
		p.rewrite(next.toml())
		p.signal(syscall.SIGHUP)
		time.Sleep(2 * time.Second)
	}
	return kills
}

// shortOutcomes sorts the short connections: a failure is "cut" when a
// backend was killed while it was open.
func shortOutcomes(samples []sample, kills []time.Time) (ok, cut, failed int, firstErr error) {
	for _, s := range samples {
		if s.err == nil {
			ok++
			continue
		}
		during := false
		for _, k := range kills {
			if !k.Before(s.start) && !k.After(s.end) {
				during = true
			}
		}
		if during {
			cut++
			continue
		}
		failed++
		if firstErr == nil {
			firstErr = s.err
		}
	}
	return ok, cut, failed, firstErr
}

// peakWatch samples the runtime figures every second and keeps the highest.
type peakWatch struct {
	stop chan struct{}
	done chan struct{}
	peak map[string]float64
}

func watchPeak(t *testing.T, p *proc, start map[string]float64) *peakWatch {
	w := &peakWatch{stop: make(chan struct{}), done: make(chan struct{}), peak: map[string]float64{}}
	for k, v := range start {
		w.peak[k] = v
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			v, err := p.metricValues(soakMetrics...)
			if err != nil {
				continue // the admin endpoint busy for a moment: next second
			}
			for k, x := range v {
				w.peak[k] = max(w.peak[k], x)
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *peakWatch) halt() {
	testutil.CloseOnce(w.stop)
	<-w.done
}

func (w *peakWatch) finish() map[string]float64 {
	w.halt()
	return w.peak
}

// streamLoad holds long connections that echo a line every 200 ms; one
// that breaks (its backend was killed) is reopened.
type streamLoad struct {
	stop          chan struct{}
	wg            sync.WaitGroup
	lines, breaks atomic.Int64
	mu            sync.Mutex
	breakTimes    []time.Time
}

func startStreams(t *testing.T, vip string, n int) *streamLoad {
	l := &streamLoad{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for opened := 0; opened < 10000 && !l.stopped(); opened++ {
				if err := l.stream(vip, i); err != nil {
					l.breaks.Add(1)
					l.mu.Lock()
					l.breakTimes = append(l.breakTimes, time.Now())
					l.mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(l.finish)
	return l
}

func (l *streamLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// stream echoes a line every 200 ms until stopped or broken.
func (l *streamLoad) stream(vip string, i int) error {
	c, err := net.DialTimeout("tcp", vip, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-l.stop:
			return nil
		case <-tick.C:
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := echoLine(c, r, fmt.Sprintf("stream %d line %d", i, seq)); err != nil {
			return err
		}
		l.lines.Add(1)
	}
}

// unexplained counts the breaks not within 2 s after a backend kill.
func (l *streamLoad) unexplained(kills []time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.breakTimes {
		explained := false
		for _, k := range kills {
			if !b.Before(k) && b.Sub(k) < 2*time.Second {
				explained = true
			}
		}
		if !explained {
			n++
		}
	}
	return n
}

func (l *streamLoad) finish() {
	if !l.stopped() {
		close(l.stop)
	}
	l.wg.Wait()
}

// bulkLoad sends size bytes over a new connection and reads them back, in
// a loop per worker.
type bulkLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	ok, cut atomic.Int64
}

func startBulk(t *testing.T, vip string, workers, size int) *bulkLoad {
	l := &bulkLoad{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := bulkOnce(vip, size); err != nil {
					l.cut.Add(1)
					time.Sleep(50 * time.Millisecond)
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.finish)
	return l
}

func (l *bulkLoad) finish() {
	testutil.CloseOnce(l.stop)
	l.wg.Wait()
}

func bulkOnce(vip string, size int) error {
	c, err := net.DialTimeout("tcp", vip, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	sent := make(chan error, 1)
	go func() {
		_, err := io.CopyN(c, zeros{}, int64(size))
		c.(*net.TCPConn).CloseWrite()
		sent <- err
	}()
	n, err := io.Copy(io.Discard, c)
	if serr := <-sent; serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	if n != int64(size) {
		return fmt.Errorf("bulk: %d bytes back of %d", n, size)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
