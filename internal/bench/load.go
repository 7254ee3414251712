package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// loadSpec is one measurement run by the `load` subcommand, a separate
// process so it can be pinned to a core of its own choosing.
type loadSpec struct {
	Kind     string        // bulk-up, bulk-down, connrate, pingpong, idle, failover
	Targets  []string      // addresses the client connects to, used round-robin
	Conns    int           // streams, workers or connections
	Duration time.Duration // how long the load runs (idle: the most it holds)
	Size     int           // ping-pong message size
	Rate     int           // failover: new connections per second
	Sources  int           // loopback source addresses 127.0.0.1..N to spread ephemeral ports
}

// loadResult is what the load process prints as one JSON line.
type loadResult struct {
	Ops         int64    `json:"ops"`   // connections, round trips or streams
	Bytes       int64    `json:"bytes"` // payload moved
	Seconds     float64  `json:"seconds"`
	Errors      int64    `json:"errors"`
	FirstError  string   `json:"first_error,omitempty"`
	P50us       float64  `json:"p50_us"`
	P99us       float64  `json:"p99_us"`
	P999us      float64  `json:"p999_us"`
	Established int      `json:"established"`
	FailedIDs   []uint64 `json:"failed_ids,omitempty"` // failover: ids of the failed connections
}

// maxSamples bounds the latency samples one run keeps.
const maxSamples = 2_000_000

// ioTimeout bounds every single connect, read or write of the client.
const ioTimeout = 5 * time.Second

func runLoad(ctx context.Context, spec loadSpec, stdin io.Reader, stdout io.Writer) error {
	if len(spec.Targets) == 0 || spec.Conns < 1 {
		return fmt.Errorf("load %s: need targets and at least one connection", spec.Kind)
	}
	c := &client{spec: spec}
	var res loadResult
	var err error
	switch spec.Kind {
	case "bulk-up", "bulk-down":
		res, err = c.bulk(ctx, spec.Kind == "bulk-up")
	case "connrate":
		res, err = c.connRate(ctx)
	case "pingpong":
		res, err = c.pingPong(ctx)
	case "failover":
		res, err = c.failover(ctx)
	case "idle":
		return c.idle(ctx, stdin, stdout)
	default:
		return fmt.Errorf("load: unknown kind %q", spec.Kind)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

type client struct {
	spec   loadSpec
	next   atomic.Uint64
	errors atomic.Int64
	mu     sync.Mutex
	first  string
}

// dial connects to the next target, from the next loopback source address.
func (c *client) dial(ctx context.Context) (net.Conn, error) {
	n := c.next.Add(1)
	target := c.spec.Targets[n%uint64(len(c.spec.Targets))]
	d := net.Dialer{Timeout: ioTimeout}
	if c.spec.Sources > 1 {
		src := net.IPv4(127, 0, 0, byte(1+n%uint64(c.spec.Sources)))
		d.LocalAddr = &net.TCPAddr{IP: src}
		// Bind the source address without picking a port yet, so the kernel
		// picks the port per destination at connect time.
		d.Control = bindNoPort
	}
	return d.DialContext(ctx, "tcp", target)
}

func bindNoPort(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, 24 /* IP_BIND_ADDRESS_NO_PORT */, 1)
	})
	if err != nil {
		return err
	}
	if errors.Is(serr, syscall.ENOPROTOOPT) {
		// qemu-user (make test-multiarch) does not pass the option on;
		// without it bind picks the port at once, which serves as long
		// as the source addresses' ports last.
		return nil
	}
	return serr
}

func (c *client) fail(err error) {
	if c.errors.Add(1) == 1 {
		c.mu.Lock()
		c.first = err.Error()
		c.mu.Unlock()
	}
}

func (c *client) result(ops, bytes int64, took time.Duration, lat []float64) loadResult {
	r := loadResult{Ops: ops, Bytes: bytes, Seconds: took.Seconds(), Errors: c.errors.Load(), FirstError: c.first}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50us, r.P99us, r.P999us = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999)
	}
	return r
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// bulk moves data through Conns streams for Duration, up (client writes,
// backend sinks) or down (backend writes, client reads).
func (c *client) bulk(ctx context.Context, up bool) (loadResult, error) {
	conns, err := c.dialAll(ctx, c.spec.Conns, modeFor(up))
	if err != nil {
		return loadResult{}, err
	}
	var total atomic.Int64
	start := time.Now()
	end := start.Add(c.spec.Duration)
	eachConn(conns, func(_ int, conn net.Conn) {
		conn.SetDeadline(end)
		buf := make([]byte, bulkChunk)
		for time.Now().Before(end) {
			var n int
			var err error
			if up {
				n, err = conn.Write(buf)
			} else {
				n, err = conn.Read(buf)
			}
			total.Add(int64(n))
			if err != nil {
				if !isTimeout(err) {
					c.fail(err)
				}
				return
			}
		}
	})
	return c.result(int64(len(conns)), total.Load(), time.Since(start), nil), nil
}

// eachConn runs work on every connection at once, each in its own
// goroutine, closes each when its work returns, and waits for them all.
func eachConn(conns []net.Conn, work func(i int, conn net.Conn)) {
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			work(i, conn)
		}()
	}
	wg.Wait()
}

func modeFor(up bool) byte {
	if up {
		return modeSink
	}
	return modeSource
}

// dialAll opens n connections and sends each the mode byte.
func (c *client) dialAll(ctx context.Context, n int, mode byte) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for range n {
		conn, err := c.dial(ctx)
		if err == nil {
			_, err = conn.Write([]byte{mode})
		}
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, fmt.Errorf("open connection %d of %d: %w", len(conns)+1, n, err)
		}
		conns = append(conns, conn)
	}
	return conns, nil
}

// oneShot is one short-lived connection: connect, ask for one byte, read it,
// close. It returns the time from the start of connect to the first byte.
func (c *client) oneShot(ctx context.Context) (time.Duration, error) {
	return c.oneShotTagged(ctx, nil)
}

// oneShotTagged is oneShot that sends id first, for the backend to log.
func (c *client) oneShotTagged(ctx context.Context, id []byte) (time.Duration, error) {
	start := time.Now()
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(start.Add(ioTimeout))
	req := append([]byte{modeFirst}, id...)
	if id != nil {
		req[0] = modeTagged
	}
	if _, err := conn.Write(req); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, fmt.Errorf("read first byte: %w", err)
	}
	return time.Since(start), nil
}

// connRate opens and closes connections as fast as Conns workers can for Duration.
func (c *client) connRate(ctx context.Context) (loadResult, error) {
	start := time.Now()
	end := start.Add(c.spec.Duration)
	lats := make([][]float64, c.spec.Conns)
	var wg sync.WaitGroup
	for w := range c.spec.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep := maxSamples / c.spec.Conns
			for time.Now().Before(end) && ctx.Err() == nil {
				lat, err := c.oneShot(ctx)
				if err != nil {
					c.fail(err)
					time.Sleep(time.Millisecond) // a refusing target must not turn this into a spin
					continue
				}
				if len(lats[w]) < keep {
					lats[w] = append(lats[w], float64(lat.Microseconds()))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	all := slices.Concat(lats...)
	return c.result(int64(len(all)), 0, took, all), nil
}

// pingPong sends Size-byte messages and waits for the echo on Conns
// persistent connections for Duration.
func (c *client) pingPong(ctx context.Context) (loadResult, error) {
	conns, err := c.dialAll(ctx, c.spec.Conns, modeEcho)
	if err != nil {
		return loadResult{}, err
	}
	start := time.Now()
	end := start.Add(c.spec.Duration)
	lats := make([][]float64, len(conns))
	eachConn(conns, func(i int, conn net.Conn) {
		msg := make([]byte, c.spec.Size)
		keep := maxSamples / len(conns)
		for time.Now().Before(end) {
			t := time.Now()
			conn.SetDeadline(t.Add(ioTimeout))
			if _, err := conn.Write(msg); err != nil {
				c.fail(err)
				return
			}
			if _, err := io.ReadFull(conn, msg); err != nil {
				c.fail(err)
				return
			}
			if len(lats[i]) < keep {
				lats[i] = append(lats[i], float64(time.Since(t).Nanoseconds())/1e3)
			}
		}
	})
	all := slices.Concat(lats...)
	return c.result(int64(len(all)), 0, time.Since(start), all), nil
}

// failover opens Rate connections per second for Duration, each as a
// separate goroutine so a slow one does not lower the rate.
func (c *client) failover(ctx context.Context) (loadResult, error) {
	start := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(c.spec.Rate))
	defer tick.Stop()
	timer := time.NewTimer(c.spec.Duration)
	defer timer.Stop()
	var wg sync.WaitGroup
	var ok atomic.Int64
	inflight := make(chan struct{}, 2000) // bounds the goroutines
	var launched int64
	base := uint64(time.Now().UnixNano()) << 20 // ids unique across runs
	var failedMu sync.Mutex
	var failed []uint64
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-timer.C:
			break loop
		case <-tick.C:
		}
		select {
		case inflight <- struct{}{}:
		default:
			c.fail(fmt.Errorf("more than %d connections in flight", cap(inflight)))
			continue
		}
		launched++
		id := base + uint64(launched)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-inflight }()
			if _, err := c.oneShotTagged(ctx, binary.LittleEndian.AppendUint64(nil, id)); err != nil {
				c.fail(err)
				failedMu.Lock()
				failed = append(failed, id)
				failedMu.Unlock()
				return
			}
			ok.Add(1)
		}()
	}
	wg.Wait()
	res := c.result(launched, 0, time.Since(start), nil)
	res.FailedIDs = failed
	return res, nil
}

// idle opens Conns connections, checks each end to end (one byte back from
// the backend), prints the result, then holds them until stdin closes or
// Duration passes, whichever comes first.
func (c *client) idle(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	start := time.Now()
	conns := make([]net.Conn, c.spec.Conns)
	var established atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 { // concurrent dialers, so the proxies see a burst but not a flood
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				conn, err := c.dial(ctx)
				if err != nil {
					c.fail(err)
					continue
				}
				conns[i] = conn
				conn.SetDeadline(time.Now().Add(ioTimeout))
				var b [1]byte
				b[0] = modeFirst
				if _, err := conn.Write(b[:]); err != nil {
					c.fail(err)
					continue
				}
				if _, err := io.ReadFull(conn, b[:]); err != nil {
					c.fail(err)
					continue
				}
				conn.SetDeadline(time.Time{})
				established.Add(1)
			}
		}()
	}
	for i := range conns {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	res := c.result(int64(len(conns)), 0, time.Since(start), nil)
	res.Established = int(established.Load())
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	released := make(chan struct{})
	go func() {
		bufio.NewReader(stdin).ReadString('\n')
		close(released)
	}()
	select {
	case <-released:
	case <-ctx.Done():
	case <-time.After(c.spec.Duration):
	}
	for _, conn := range conns {
		if conn != nil {
			conn.Close()
		}
	}
	return nil
}
