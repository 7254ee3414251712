package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
)

// results records every result a checker reports.
type results struct {
	mu  sync.Mutex
	all []Result
}

func (e *results) add(r Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, r)
}

func (e *results) of(name string) []Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Result
	for _, ev := range e.all {
		if ev.Target.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

func healthConfig(kind config.CheckKind) config.Health {
	cfg := config.Default().Health
	cfg.Type = kind
	cfg.Interval = config.Duration{Duration: 20 * time.Millisecond}
	// A bound for a hang, not a figure: under qemu-user on a loaded
	// 2-core host one TLS handshake with /readyz took over 2 s (make
	// test-multiarch). Tests about the timeout set their own.
	cfg.Timeout = config.Duration{Duration: 30 * time.Second}
	return cfg
}

// startChecker runs a checker over targets until the test ends.
func startChecker(t *testing.T, cfg config.Health, targets ...Target) (*Checker, *results) {
	t.Helper()
	c, rec, _ := runLogged(t, cfg, nil, slog.LevelInfo, targets...)
	return c, rec
}

// runLogged runs a checker with prober (nil: the one cfg configures),
// logging at level into the returned buffer, until the test ends.
func runLogged(t *testing.T, cfg config.Health, prober Prober, level slog.Level, targets ...Target) (*Checker, *results, *lockedBuffer) {
	t.Helper()
	if prober == nil {
		var err error
		if prober, err = NewProber(cfg); err != nil {
			t.Fatalf("NewProber: %v", err)
		}
	}
	rec, out := &results{}, &lockedBuffer{}
	c := New(cfg, prober, rec.add)
	c.SetLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})))
	c.SetTargets(targets)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c, rec, out
}

func stateOf(c *Checker, name string) Status {
	for _, s := range c.Snapshot() {
		if s.Name == name {
			return s
		}
	}
	return Status{}
}

// listen serves addr, closing each connection at once: a TCP check
// passes.
func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln := testutil.Listen(t, addr)
	testutil.Serve(t, ln, testutil.Close)
	return ln
}

// last returns the outcome of name's latest result, or an invalid one
// before any.
func (e *results) last(name string) Outcome {
	rs := e.of(name)
	if len(rs) == 0 {
		return Outcome(255)
	}
	return rs[len(rs)-1].Outcome
}

// Every result is reported as it is, passed or failed: the checker keeps
// no verdict of its own (the pool counts rise and fall).
func TestTCPCheckReportsEachResult(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	cfg := healthConfig(config.CheckTCP)
	cfg.Rise, cfg.Fall = 3, 2
	c, rec := startChecker(t, cfg, Target{Name: "a", Address: addr})

	testutil.WaitFor(t, "a passed", func() bool { return rec.last("a") == Pass })
	ln.Close()
	// A check whose connect raced the close lands in the closing
	// listener's queue and is reset; the next ones are refused. Each is
	// reported with its own error.
	testutil.WaitFor(t, "a refused", func() bool {
		rs := rec.of("a")
		if len(rs) == 0 {
			return false
		}
		r := rs[len(rs)-1]
		return r.Outcome == Fail && r.Err != nil && strings.Contains(r.Err.Error(), "connection refused")
	})
	if s := stateOf(c, "a"); !strings.Contains(s.LastError, "tcp connect") || s.LastCheck.IsZero() {
		t.Fatalf("status %+v: LastError does not say what failed", s)
	}

	listen(t, addr) // the backend returns on the same port
	testutil.WaitFor(t, "a passed again", func() bool { return rec.last("a") == Pass })
	if s := stateOf(c, "a"); s.LastError != "" {
		t.Fatalf("status after recovery: %+v", s)
	}
}

func TestFirstRoundChecksEveryTarget(t *testing.T) {
	up := listen(t, "127.0.0.1:0").Addr().String()
	closed := listen(t, "127.0.0.1:0")
	closed.Close()
	cfg := healthConfig(config.CheckTCP)
	c, rec := startChecker(t, cfg, Target{"up", up}, Target{"closed", closed.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitFirstRound(ctx); err != nil {
		t.Fatal(err)
	}
	if r := rec.of("up"); r[0].Outcome != Pass {
		t.Fatalf("up: first result %+v", r[0])
	}
	if r := rec.of("closed"); r[0].Outcome != Fail {
		t.Fatalf("closed: first result %+v", r[0])
	}
}

// tlsServer starts an HTTPS server requiring a client certificate from
// the test CA; /readyz answers with status.
func tlsServer(t testing.TB, pki *testpki.Files, status int) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, http.StatusText(status))
	}))
	serverTLS, err := pki.ServerTLS() // requires a client certificate from the CA
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = serverTLS
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point of some tests
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestHTTPSCheckSeesFailingReadyz(t *testing.T) {
	pki := newTestPKI(t)
	failing := tlsServer(t, pki, http.StatusInternalServerError)
	healthy := tlsServer(t, pki, http.StatusOK)
	targets := []Target{{"failing", failing}, {"healthy", healthy}}

	https := healthConfig(config.CheckHTTPS)
	https.CAFile, https.CertFile, https.KeyFile = pki.CA, pki.ClientCert, pki.ClientKey
	hc, hrec := startChecker(t, https, targets...)
	tc, trec := startChecker(t, healthConfig(config.CheckTCP), targets...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []*Checker{hc, tc} {
		if err := c.WaitFirstRound(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := stateOf(hc, "failing"); hrec.last("failing") != Fail || s.LastError != "https GET /readyz: status 500" {
		t.Fatalf("https check of a 500 /readyz: %v %q", hrec.last("failing"), s.LastError)
	}
	if s := stateOf(hc, "healthy"); hrec.last("healthy") != Pass {
		t.Fatalf("https check of a 200 /readyz: %v %q", hrec.last("healthy"), s.LastError)
	}
	if s := stateOf(tc, "failing"); trec.last("failing") != Pass {
		t.Fatalf("tcp check of the 500 server: %v %q (tcp cannot see /readyz)", trec.last("failing"), s.LastError)
	}
}

func TestTLSProbes(t *testing.T) {
	pki, other := newTestPKI(t), newTestPKI(t)
	addr := tlsServer(t, pki, http.StatusOK)
	ctx := context.Background()
	probe := func(mutate func(*config.Health)) error {
		t.Helper()
		for _, kind := range []config.CheckKind{config.CheckTLS, config.CheckHTTPS} {
			cfg := healthConfig(kind)
			cfg.CAFile, cfg.CertFile, cfg.KeyFile = pki.CA, pki.ClientCert, pki.ClientKey
			mutate(&cfg)
			p, err := NewProber(cfg)
			if err != nil {
				t.Fatalf("NewProber: %v", err)
			}
			if err := p.Probe(ctx, addr); err != nil {
				return err
			}
		}
		return nil
	}
	if err := probe(func(*config.Health) {}); err != nil {
		t.Fatalf("verified mTLS probe: %v", err)
	}
	if err := probe(func(c *config.Health) { c.ServerName = "apiserver.test" }); err != nil {
		t.Fatalf("probe with server_name in the certificate: %v", err)
	}
	if err := probe(func(c *config.Health) { c.ServerName = "wrong.test" }); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("probe with a server_name not in the certificate: %v", err)
	}
	if err := probe(func(c *config.Health) { c.CAFile = other.CA }); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("probe verifying against another CA: %v", err)
	}
	if err := probe(func(c *config.Health) { c.CAFile = "" }); err != nil {
		t.Fatalf("probe without CA (no verification): %v", err)
	}
	// The server requires a client certificate: without one the check fails.
	if err := probe(func(c *config.Health) { c.CertFile, c.KeyFile = "", "" }); err == nil {
		t.Fatal("probe without a client certificate passed against an mTLS server")
	}
}

// TestNewProberRejectsBadFiles: config.Validate judged the files, but they
// are read again here, and one changed since is an error, not a prober
// whose every check fails.
func TestNewProberRejectsBadFiles(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name, want string
		mutate     func(*config.Health)
	}{
		{"missing CA", "read CA", func(c *config.Health) { c.CAFile = "/nonexistent/ca.pem" }},
		{"CA not PEM", "no PEM certificate", func(c *config.Health) { c.CAFile = pki.ClientKey }},
		{"mismatched pair", "load client certificate", func(c *config.Health) { c.CertFile, c.KeyFile = pki.ClientCert, pki.CA }},
	} {
		cfg := healthConfig(config.CheckHTTPS)
		tc.mutate(&cfg)
		if _, err := NewProber(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// hangingServers accept TCP and never answer; they count the connections
// open at once across all of them.
type hangingServers struct {
	mu            sync.Mutex
	open, maxOpen int
}

func (h *hangingServers) start(t *testing.T) string {
	t.Helper()
	return testutil.ServeAddr(t, func(conn net.Conn) {
		h.change(+1)
		io.Copy(io.Discard, conn) // until the prober gives up and closes
		conn.Close()
		h.change(-1)
	})
}

func (h *hangingServers) change(d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open += d
	h.maxOpen = max(h.maxOpen, h.open)
}

func (h *hangingServers) max() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxOpen
}

func TestHTTPSCheckTimesOutOnSilentServer(t *testing.T) {
	hang := &hangingServers{}
	cfg := healthConfig(config.CheckHTTPS)
	cfg.Timeout = config.Duration{Duration: 200 * time.Millisecond}
	_, rec := startChecker(t, cfg, Target{"silent", hang.start(t)})
	testutil.WaitFor(t, "silent checked", func() bool { return len(rec.of("silent")) > 0 })
	ev := rec.of("silent")[0]
	if ev.Outcome != Fail || ev.Err == nil || !strings.HasPrefix(ev.Err.Error(), "https GET /readyz: ") ||
		!strings.Contains(ev.Err.Error(), "health.timeout 200ms") {
		t.Fatalf("first event: %+v", ev)
	}
	t.Logf("silent server: %v", ev.Err)
}

func TestChecksRunConcurrently(t *testing.T) {
	hang := &hangingServers{}
	cfg := healthConfig(config.CheckHTTPS)
	// A timeout far longer than the test: three probes can only be open at
	// once if they run side by side; one after another would show one.
	cfg.Timeout = config.Duration{Duration: time.Minute}
	cfg.Interval = config.Duration{Duration: time.Second}
	var targets []Target
	for _, name := range []string{"a", "b", "c"} {
		targets = append(targets, Target{name, hang.start(t)})
	}
	c, _ := startChecker(t, cfg, targets...)
	testutil.WaitFor(t, "3 probes in flight at once", func() bool { return hang.max() == 3 })
	for _, s := range c.Snapshot() {
		if !s.LastCheck.IsZero() {
			t.Fatalf("%s has a result although its probe is still hanging: %+v", s.Name, s)
		}
	}
	if !c.Alive() {
		t.Fatal("checker not alive while its probes wait within the timeout")
	}
}

func TestSetTargetsKeepsUnchangedState(t *testing.T) {
	a := listen(t, "127.0.0.1:0").Addr().String()
	b := listen(t, "127.0.0.1:0").Addr().String()
	cAddr := listen(t, "127.0.0.1:0").Addr().String()
	c, rec := startChecker(t, healthConfig(config.CheckTCP), Target{"a", a}, Target{"b", b})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitFirstRound(ctx); err != nil {
		t.Fatal(err)
	}
	before := stateOf(c, "a")

	c.SetTargets([]Target{{"a", a}, {"c", cAddr}, {"a", a}})
	if s := stateOf(c, "a"); s.LastCheck.IsZero() || s.LastCheck.Before(before.LastCheck) {
		t.Fatalf("a after SetTargets: %+v, before: %+v", s, before)
	}
	if err := c.WaitFirstRound(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "c's first result recorded", func() bool { return len(rec.of("c")) > 0 })
	snap := c.Snapshot()
	if len(snap) != 2 || snap[0].Name != "a" || snap[1].Name != "c" || snap[1].LastCheck.IsZero() {
		t.Fatalf("snapshot after SetTargets: %+v", snap)
	}
	// b is no longer checked: while a gets several more results, b gets none.
	nA := len(rec.of("a"))
	testutil.WaitFor(t, "a checked again", func() bool { return len(rec.of("a")) >= nA+3 })
	nB := len(rec.of("b"))
	testutil.WaitFor(t, "a checked more", func() bool { return len(rec.of("a")) >= nA+6 })
	if got := len(rec.of("b")); got != nB {
		t.Fatalf("removed target b still checked: %d events, was %d", got, nB)
	}
	for _, ev := range rec.of("a") {
		if ev.Outcome != Pass {
			t.Fatalf("a failed across SetTargets: %+v", ev)
		}
	}
}

func TestAliveAndWaitFirstRound(t *testing.T) {
	addr := listen(t, "127.0.0.1:0").Addr().String()
	cfg := healthConfig(config.CheckTCP)
	prober, err := NewProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := New(cfg, prober, nil)
	c.SetTargets([]Target{{"a", addr}})
	if c.Alive() {
		t.Fatal("alive before Run")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := c.WaitFirstRound(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFirstRound without Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	if err := c.WaitFirstRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.Alive() {
		t.Fatal("not alive while running")
	}
	cancel()
	<-done
	if c.Alive() {
		t.Fatal("alive after Run returned")
	}
	empty := New(cfg, prober, nil)
	if err := empty.WaitFirstRound(short); err != nil {
		t.Fatalf("WaitFirstRound with no targets: %v", err)
	}
}

// WaitFirstRound returns once every current target has at least one
// result, or with ctx's error. Only tests need it: the daemon waits for
// WaitUsable.
func (c *Checker) WaitFirstRound(ctx context.Context) error {
	return c.wait(ctx, "the first round of health checks", func() bool {
		for _, t := range c.targets {
			if !t.checked {
				return false
			}
		}
		return true
	})
}

// hangingProber answers for good at once and hangs on every other address
// until the check's timeout: a backend that swallows SYNs.
type hangingProber struct{ good string }

func (p hangingProber) Probe(ctx context.Context, addr string) error {
	if addr == p.good {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestWaitUsableDoesNotWaitForAHangingBackend(t *testing.T) {
	cfg := healthConfig(config.CheckTCP)
	cfg.Timeout = config.Duration{Duration: time.Minute} // longer than the test may take
	cfg.Interval = cfg.Timeout
	rec := &results{}
	c := New(cfg, hangingProber{good: "good:1"}, rec.add)
	c.SetTargets([]Target{{"hanging", "hanging:1"}, {"good", "good:1"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	bounded, cancelBounded := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelBounded()
	// The waiter asks after every result, once onResult has seen it: a
	// wake-up before would miss the good result for good (the other check
	// hangs for a minute).
	if err := c.WaitUsable(bounded, func() bool { return rec.last("good") == Pass }); err != nil {
		t.Fatalf("WaitUsable with one backend up: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := c.WaitFirstRound(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFirstRound while a check hangs: %v, want the deadline", err)
	}
}

// failingProber fails every check, to swap in with SetConfig.
type failingProber struct{}

func (failingProber) Probe(context.Context, string) error { return errors.New("swapped prober") }

func TestSetConfigSwapsProber(t *testing.T) {
	addr := listen(t, "127.0.0.1:0").Addr().String()
	cfg := healthConfig(config.CheckTCP)
	c, rec := startChecker(t, cfg, Target{"a", addr})
	testutil.WaitFor(t, "a passed", func() bool { return rec.last("a") == Pass })
	c.SetConfig(cfg, failingProber{})
	testutil.WaitFor(t, "a failed", func() bool { return rec.last("a") == Fail })
	rs := rec.of("a")
	if err := rs[len(rs)-1].Err; err == nil || !strings.Contains(err.Error(), "swapped prober") {
		t.Fatalf("error %v", err)
	}
}

// lockedBuffer is a log sink the test can read while the checker writes.
type lockedBuffer struct{ testutil.Buffer }

func (b *lockedBuffer) lines() []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// At info, checks that pass or fail log nothing here: what they mean for
// the backend (a transition) is the pool's to decide and the daemon's to
// log, once.
func TestNoLogLinePerCheck(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	cfg := healthConfig(config.CheckTCP)
	_, rec, out := runLogged(t, cfg, nil, slog.LevelInfo, Target{"a", ln.Addr().String()})

	testutil.WaitFor(t, "a passed", func() bool { return rec.last("a") == Pass })
	ln.Close()
	testutil.WaitFor(t, "a failed", func() bool { return rec.last("a") == Fail })
	n := len(rec.of("a"))
	testutil.WaitFor(t, "more failed checks", func() bool { return len(rec.of("a")) >= n+3 })
	if lines := out.lines(); len(lines) != 1 || lines[0] != "" {
		t.Fatalf("%d log lines at info for %d checks:\n%s", len(lines), len(rec.of("a")), strings.Join(lines, "\n"))
	}
}

// switchProber fails with a local error (as under a client flood that
// took every descriptor) while local is set, else probes for real.
type switchProber struct {
	local atomic.Bool
	real  Prober
}

func (p *switchProber) Probe(ctx context.Context, addr string) error {
	if p.local.Load() {
		return fmt.Errorf("tcp connect: %w", os.NewSyscallError("socket", syscall.EMFILE))
	}
	return p.real.Probe(ctx, addr)
}

// A check that fails because this host is out of descriptors says
// nothing about the backend: it is reported as a local fault, apart.
func TestLocalFailureReportedApart(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	cfg := healthConfig(config.CheckTCP)
	real, err := NewProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prober := &switchProber{real: real}
	c, rec, out := runLogged(t, cfg, prober, slog.LevelInfo, Target{"a", ln.Addr().String()})

	testutil.WaitFor(t, "a passed", func() bool { return rec.last("a") == Pass })
	prober.local.Store(true)
	testutil.WaitFor(t, "a local failure", func() bool { return rec.last("a") == LocalFault })
	n := len(rec.of("a"))
	testutil.WaitFor(t, "five local failures", func() bool { return len(rec.of("a")) >= n+5 })
	for _, ev := range rec.of("a")[n:] {
		if ev.Outcome == Fail {
			t.Errorf("a local failure counted as the backend's: %+v", ev)
		}
	}
	if s := stateOf(c, "a"); !strings.HasPrefix(s.LastError, "local: ") {
		t.Errorf("status %+v, want a local last error", s)
	}
	if got := strings.Count(strings.Join(out.lines(), "\n"), "local reason"); got != 1 {
		t.Errorf("%d log lines about local failures, want 1 per run:\n%s", got, strings.Join(out.lines(), "\n"))
	}
	// A real failure afterwards is the backend's.
	prober.local.Store(false)
	ln.Close()
	testutil.WaitFor(t, "a failed", func() bool { return rec.last("a") == Fail })
}

// At debug every check that changes nothing is one line too.
func TestDebugLogsEachCheck(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	cfg := healthConfig(config.CheckTCP)
	_, rec, out := runLogged(t, cfg, nil, slog.LevelDebug, Target{"a", ln.Addr().String()})
	testutil.WaitFor(t, "three checks", func() bool { return len(rec.of("a")) >= 3 })
	var checks int
	for _, l := range out.lines() {
		if strings.Contains(l, "level=DEBUG msg=check backend=a outcome=passed") {
			checks++
		}
	}
	if checks < 2 {
		t.Fatalf("%d debug lines for %d checks:\n%s", checks, len(rec.of("a")), strings.Join(out.lines(), "\n"))
	}
}
