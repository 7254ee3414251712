package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
)

// TestWatchStormClientSeesTheCutAndTheReturn: the storm client must count
// every watch a backend's end cuts, find each one working again on the
// backend that takes over, and count the events missed in between, or
// the storm figures mean nothing.
func TestWatchStormClientSeesTheCutAndTheReturn(t *testing.T) {
	srv, cli := pkitest.TLS(t, pkitest.New(t))
	cli.ServerName = "127.0.0.1"
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	ln.Close()
	const period = 200 * time.Millisecond
	epoch := time.Now()
	serve := func(id int) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b := &watchBackend{id: id, tls: srv, period: period, epoch: epoch}
		go func() { done <- b.run(ctx, addr) }()
		if err := waitListening(ctx, addr, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("watch backend %d: %v", id, err)
			}
		}
	}
	stop1 := serve(1)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel) // after the watch client's end
	spec := watchSpec{Targets: []string{addr}, Clients: 20, Sources: 1, Period: period, Wait: 20 * time.Second}
	stdin, lines := startWatchClient(ctx, t, spec, cli)
	if !lines.Scan() || lines.Text() != `{"established":20}` {
		t.Fatalf("want all 20 watches established, got %q", lines.Text())
	}
	time.Sleep(3 * period) // events flow
	io.WriteString(stdin, "mark\n")
	// The cut only once the mark is set: a watch cut before it is not
	// counted (riscv64 under qemu-user: 3 of 20 counted).
	if !lines.Scan() || lines.Text() != markedLine {
		t.Fatalf("want %s after mark, got %q", markedLine, lines.Text())
	}
	stop1()
	time.Sleep(2 * period) // a gap of missed events
	stop2 := serve(2)
	defer stop2()
	io.WriteString(stdin, "wait all\n")
	if !lines.Scan() {
		t.Fatal("no result")
	}
	var res watchResult
	if err := json.Unmarshal(lines.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", lines.Text(), err)
	}
	if res.Disrupted != 20 || res.Recovered != 20 || res.Shares[0] != 0 || res.Shares[1] != 20 {
		t.Errorf("backend 1 ended, backend 2 took over: %+v, want 20 cut, 20 back, all on backend 2", res)
	}
	if res.Lost < 20 || res.Failed < 1 || res.MaxMs < float64((2*period).Milliseconds()) {
		t.Errorf("no backend for %s: %+v, want events missed by each watch, failed attempts and a return after the gap", 2*period, res)
	}
}

// TestWatchStormClientSpreadsOverTargets: given several targets (the
// backends themselves, for the direct baseline of the at-once storm),
// the watches go to each in turn, so that every backend serves its share.
func TestWatchStormClientSpreadsOverTargets(t *testing.T) {
	ctx, cli, targets := twoWatchBackends(t)
	res := atOnceWatches(ctx, t, cli, targets, 10)
	if res.Recovered != 10 || len(res.Shares) < 2 || res.Shares[0] != 5 || res.Shares[1] != 5 {
		t.Errorf("10 watches over 2 targets: %+v, want all working, 5 on each", res)
	}
}

// TestFloorProxyCarriesAWatchStorm: the floor baseline takes part in the
// at-once storm (the least a proxy's event loop costs there), so it must
// carry TLS watches connecting at once to every backend in turn.
func TestFloorProxyCarriesAWatchStorm(t *testing.T) {
	ctx, cli, backends := twoWatchBackends(t)
	addr, _ := startFloor(ctx, t, backends)
	res := atOnceWatches(ctx, t, cli, []string{addr}, 10)
	if res.Recovered != 10 || res.Failed != 0 || len(res.Shares) < 2 || res.Shares[0] != 5 || res.Shares[1] != 5 {
		t.Errorf("10 watches through the floor proxy to 2 backends: %+v, want all working at the first attempt, 5 on each", res)
	}
}

// startWatchClient runs the watch client with spec; it reads commands
// from stdin and its output lines are read from lines. At the end of the
// test stdin is closed, the client must end, and an error fails the test.
func startWatchClient(ctx context.Context, t *testing.T, spec watchSpec, cli *tls.Config) (stdin io.Writer, lines *bufio.Scanner) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- runWatchClient(ctx, spec, cli, stdinR, stdout) }()
	t.Cleanup(func() {
		stdinW.Close()
		if err := <-done; err != nil {
			t.Errorf("watch client: %v", err)
		}
	})
	return stdinW, bufio.NewScanner(stdoutR)
}

// startFloor runs the floor proxy on a free loopback address in front of
// backends and waits until it listens. stop ends it and returns what it
// returned; it is called at the end of the test too, where an error
// fails the test.
func startFloor(ctx context.Context, t *testing.T, backends []string) (addr string, stop func() error) {
	t.Helper()
	front := listenLoopback(t)
	addr = front.Addr().String()
	front.Close() // runFloor binds it itself
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runFloor(fctx, addr, backends) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("floor proxy: %v", err)
		}
	})
	if err := waitListening(ctx, addr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return addr, stop
}

// watchTestPeriod is the test backends' time between events.
const watchTestPeriod = 200 * time.Millisecond

// twoWatchBackends starts two watch backends with a test PKI, stopped
// when the test ends, and returns a context of a minute at most, the
// clients' TLS configuration and the backends' addresses.
func twoWatchBackends(t *testing.T) (context.Context, *tls.Config, []string) {
	srv, cli := pkitest.TLS(t, pkitest.New(t))
	cli.ServerName = "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var addrs []string
	for id := 1; id <= 2; id++ {
		ln := listenLoopback(t)
		addr := ln.Addr().String()
		ln.Close()
		b := &watchBackend{id: id, tls: srv, period: watchTestPeriod, epoch: time.Now()}
		done := make(chan error, 1)
		bctx, stop := context.WithCancel(ctx)
		go func() { done <- b.run(bctx, addr) }()
		t.Cleanup(func() { stop(); <-done })
		if err := waitListening(ctx, addr, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return ctx, cli, addrs
}

// atOnceWatches connects clients watches to targets at once and returns
// the storm client's result.
func atOnceWatches(ctx context.Context, t *testing.T, cli *tls.Config, targets []string, clients int) watchResult {
	stdinR, stdin := io.Pipe()
	defer stdin.Close()
	stdoutR, stdout := io.Pipe()
	spec := watchSpec{Targets: targets, Clients: clients, Sources: 1, Period: watchTestPeriod, AtOnce: true, Wait: 20 * time.Second}
	go runWatchClient(ctx, spec, cli, stdinR, stdout)
	lines := bufio.NewScanner(stdoutR)
	if !lines.Scan() {
		t.Fatal("no result")
	}
	var res watchResult
	if err := json.Unmarshal(lines.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", lines.Text(), err)
	}
	return res
}
