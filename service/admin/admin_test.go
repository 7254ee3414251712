package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/metrics"
)

// fakeSource is a daemon whose status the test sets.
type fakeSource struct {
	mu sync.Mutex
	st Status
}

func (f *fakeSource) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeSource) set(st Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
}

// drains records the calls of Options.Drain.
type drains struct {
	mu    sync.Mutex
	calls []string
}

func (d *drains) drain(name string, drain bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name != "a" {
		return ErrUnknownBackend
	}
	d.calls = append(d.calls, name+map[bool]string{true: " drain", false: " undrain"}[drain])
	return nil
}

func (d *drains) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

// serve runs the handler on ln until the test ends.
func serve(t *testing.T, ln net.Listener, h http.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// startTCP serves on a fresh loopback port and returns the base URL.
func startTCP(t *testing.T, src Source, m *metrics.Metrics, opts Options) string {
	t.Helper()
	ln, err := Listen(config.Admin{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, Handler(src, m, opts))
	return "http://" + ln.Addr().String()
}

var client = &http.Client{Timeout: 10 * time.Second}

func do(t *testing.T, method, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func backends(states ...string) []BackendStatus {
	var out []BackendStatus
	for i, name := range states {
		var s balance.State
		if err := s.UnmarshalText([]byte(name)); err != nil {
			panic(err)
		}
		out = append(out, BackendStatus{Name: string(rune('a' + i)), Address: "127.0.0.1:1", State: s})
	}
	return out
}

func TestReadyzFollowsBackendHealth(t *testing.T) {
	src := &fakeSource{}
	base := startTCP(t, src, metrics.New(), Options{})
	for _, tc := range []struct {
		name string
		st   Status
		code int
		body string
	}{
		{"starting", Status{Ready: false, Backends: backends("up", "unknown")}, 503, "not ready: daemon starting or stopping; 1/2 backends healthy\n"},
		{"none up", Status{Ready: true, Backends: backends("down", "down", "unknown")}, 503, "not ready: 0/3 backends healthy\n"},
		{"one up", Status{Ready: true, Backends: backends("down", "up", "down")}, 200, "ready: 1/3 backends healthy\n"},
		{"all up", Status{Ready: true, Backends: backends("up", "up")}, 200, "ready: 2/2 backends healthy\n"},
		{"only up one draining", Status{Ready: true, Backends: []BackendStatus{{Name: "a", State: balance.Up, Draining: true}}}, 503, "not ready: 0/1 backends healthy\n"},
		{"no backends", Status{Ready: true}, 503, "not ready: 0/0 backends healthy\n"},
		// [[port]]: only required ports count; an optional one down on
		// every node keeps the node ready (and the VIP).
		{"optional port down", Status{Ready: true, Ports: []PortStatus{
			{Name: "api", Required: true, Healthy: 3, Backends: 3},
			{Name: "konnectivity", Healthy: 0, Backends: 3},
		}}, 200, "ready: api 3/3, konnectivity 0/3 (optional) backends healthy\n"},
		{"required port down", Status{Ready: true, Ports: []PortStatus{
			{Name: "api", Required: true, Healthy: 0, Backends: 3},
			{Name: "join", Required: true, Healthy: 3, Backends: 3},
		}}, 503, "not ready: api 0/3, join 3/3 backends healthy\n"},
	} {
		src.set(tc.st)
		code, body := do(t, "GET", base+"/readyz")
		if code != tc.code || body != tc.body {
			t.Errorf("%s: /readyz = %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
		if code, _ := do(t, "HEAD", base+"/readyz"); code != tc.code {
			t.Errorf("%s: HEAD /readyz = %d, want %d", tc.name, code, tc.code)
		}
	}
	// Liveness does not depend on the backends.
	if code, body := do(t, "GET", base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
}

func TestStatusJSON(t *testing.T) {
	checked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := &fakeSource{st: Status{
		Ready: true, Version: "v1.2.3", OpenConnections: 7, ConfigPath: "/etc/vipproxy/vipproxy.toml",
		ConfigError: "bad.toml: backend: at least one [[backend]] is required", LastReload: checked,
		Backends: []BackendStatus{
			{Name: "api-a", Address: "10.0.0.1:6443", State: balance.Up, LastCheck: checked, OpenConnections: 5},
			{Name: "api-b", Address: "10.0.0.2:6443", State: balance.Down, LastError: "tcp connect: connection refused", Draining: true},
		},
	}}
	base := startTCP(t, src, metrics.New(), Options{})
	resp, err := client.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/status: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got Status
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	want := src.Status()
	if got.Version != want.Version || got.OpenConnections != 7 || got.ConfigError != want.ConfigError ||
		!got.LastReload.Equal(checked) || len(got.Backends) != 2 || got.Backends[1] != want.Backends[1] ||
		!got.Backends[0].LastCheck.Equal(checked) || got.Backends[0].OpenConnections != 5 {
		t.Fatalf("/status round trip:\n got %+v\nwant %+v", got, want)
	}
	src.set(Status{})
	if _, body := do(t, "GET", base+"/status"); !strings.Contains(body, `"backends": []`) || strings.Contains(body, "last_reload") {
		t.Fatalf("empty status: %s", body)
	}
}

func TestMetricsEndpointParses(t *testing.T) {
	m := metrics.New()
	m.Backend("api", "api-a").ConnectionsTotal.Add(2)
	base := startTCP(t, &fakeSource{}, m, Options{})
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	// Prometheus 3 refuses a scrape whose Content-Type it cannot read.
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("Content-Type %q is not the text format (%v)", resp.Header.Get("Content-Type"), f)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	f, ok := fams["vipproxy_connections_total"]
	if !ok || len(f.Metric) != 1 || f.Metric[0].Counter.GetValue() != 2 {
		t.Fatalf("vipproxy_connections_total: %v", f)
	}
}

func TestMethodsAndPaths(t *testing.T) {
	d := &drains{}
	base := startTCP(t, &fakeSource{}, metrics.New(), Options{Drain: d.drain})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/healthz", 200},
		{"HEAD", "/healthz", 200},
		{"HEAD", "/metrics", 200},
		{"POST", "/healthz", 405},
		{"PUT", "/status", 405},
		{"DELETE", "/readyz", 405},
		{"POST", "/metrics", 405},
		{"GET", "/", 404},
		{"GET", "/nope", 404},
		{"GET", "/healthz/extra", 404},
		{"GET", "/backends/a/drain", 405},
		{"POST", "/backends/a/drain", 403}, // mutations are off
		{"POST", "/backends/a/undrain", 403},
	} {
		if code, body := do(t, tc.method, base+tc.path); code != tc.code {
			t.Errorf("%s %s = %d %q, want %d", tc.method, tc.path, code, body, tc.code)
		}
	}
	if d.count() != 0 {
		t.Fatalf("drain called %d times with mutations disabled", d.count())
	}
}

func TestMutationsWhenEnabled(t *testing.T) {
	d := &drains{}
	base := startTCP(t, &fakeSource{}, metrics.New(), Options{EnableMutations: true, Drain: d.drain})
	if code, body := do(t, "POST", base+"/backends/a/drain"); code != 200 || body != "draining a\n" {
		t.Errorf("drain a: %d %q", code, body)
	}
	if code, _ := do(t, "POST", base+"/backends/a/undrain"); code != 200 {
		t.Errorf("undrain a: %d", code)
	}
	if code, _ := do(t, "POST", base+"/backends/zz/drain"); code != 404 {
		t.Errorf("drain unknown: %d", code)
	}
	if code, _ := do(t, "POST", base+"/backends/a/drain", "Origin", "https://evil.example"); code != 403 {
		t.Errorf("cross-origin drain: %d", code)
	}
	if strings.Join(d.calls, ",") != "a drain,a undrain" {
		t.Fatalf("drain calls: %v", d.calls)
	}
	// Without a Drain callback there is nothing to mutate.
	base = startTCP(t, &fakeSource{}, metrics.New(), Options{EnableMutations: true})
	if code, _ := do(t, "POST", base+"/backends/a/drain"); code != 404 {
		t.Errorf("drain without callback: %d", code)
	}
}

// raw sends bytes on a new connection and returns the status line.
func raw(t *testing.T, addr, request string) string {
	t.Helper()
	line, err := testutil.FirstLine(t, addr, request)
	if err != nil {
		t.Fatalf("read answer to %q: %v", request[:min(len(request), 40)], err)
	}
	return line
}

func TestBadRequestsGet4xx(t *testing.T) {
	base := startTCP(t, &fakeSource{}, metrics.New(), Options{})
	addr := strings.TrimPrefix(base, "http://")
	for _, req := range []string{
		"GARBAGE\r\n\r\n",
		"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
		"GET /healthz HTTP/1.1\r\n\r\n", // HTTP/1.1 without Host
		"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
		"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		line := raw(t, addr, req)
		// 505 is the right answer to an unknown HTTP version; the rest are 4xx.
		if !strings.HasPrefix(line, "HTTP/1.1 4") && line != "HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" {
			t.Errorf("request %q got %q, want a 4xx", req[:min(len(req), 40)], line)
		}
	}
	// The server is still there.
	if line := raw(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); line != "HTTP/1.1 200 OK" {
		t.Fatalf("after bad requests: %q", line)
	}
}

func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.sock")

	// A stale socket file, as a crashed daemon leaves it.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	ln, err := Listen(config.Admin{Listen: "unix:" + path}, nil)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v", info.Mode(), err)
	}
	// A live socket is not taken over.
	if _, err := Listen(config.Admin{Listen: "unix:" + path}, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	src := &fakeSource{st: Status{Ready: true, Backends: backends("up")}}
	serve(t, ln, Handler(src, metrics.New(), Options{}))
	uc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	resp, err := uc.Get("http://admin/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ready: 1/1 backends healthy\n" {
		t.Fatalf("readyz over the unix socket: %d %q", resp.StatusCode, body)
	}

	// Any other kind of file at the path is left alone.
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o600)
	if _, err := Listen(config.Admin{Listen: "unix:" + regular}, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listen over a regular file: %v", err)
	}
	if data, _ := os.ReadFile(regular); string(data) != "keep me" {
		t.Fatal("regular file was touched")
	}
}

func TestListenPrefersActivatedAndAllowsNone(t *testing.T) {
	activated, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer activated.Close()
	ln, err := Listen(config.Admin{Listen: "0.0.0.0:1"}, activated)
	if err != nil || ln != activated {
		t.Fatalf("activated listener not used: %v %v", ln, err)
	}
	ln, err = Listen(config.Admin{}, nil)
	if err != nil || ln != nil {
		t.Fatalf("empty listen without activation: %v %v", ln, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Serve(ctx, nil, nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("Serve without listener: %v", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := Listen(config.Admin{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(&fakeSource{}, nil, Options{}), slog.New(slog.DiscardHandler)) }()
	if code, _ := do(t, "GET", "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	// Without metrics there is no /metrics route.
	if code, _ := do(t, "GET", "http://"+addr+"/metrics"); code != 404 {
		t.Fatalf("metrics without a registry: %d", code)
	}
	cancel()
	if err := testutil.Await(t, done, 10*time.Second, "Serve to return after its context was cancelled"); err != nil {
		t.Fatalf("Serve returned %v after cancel", err)
	}
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Fatal("listener still accepts after shutdown")
	}
}

// The HTTP server's own errors reach the daemon's logger as warnings, not
// slog.Default() at debug, where nothing shows them.
func TestServerErrorsReachTheLogger(t *testing.T) {
	var mu sync.Mutex
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), log)
	}()
	if resp, err := client.Get("http://" + ln.Addr().String() + "/"); err == nil {
		resp.Body.Close() // the server drops the connection; either way it logged
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "panic serving") ||
		!strings.Contains(logged.String(), "component=admin") {
		t.Fatalf("the handler's panic was not logged as an admin warning: %q", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Idle clients cannot take more than MaxConns descriptors: the next one
// waits in the backlog and is served as soon as one of them leaves.
func TestConnectionLimit(t *testing.T) {
	addr := strings.TrimPrefix(startTCP(t, &fakeSource{}, nil, Options{}), "http://")
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range MaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	next, err := net.Dial("tcp", addr) // the kernel's backlog takes it
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	io.WriteString(next, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	r := bufio.NewReader(next)
	next.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("served %q with %d idle connections open", line, MaxConns)
	}
	idle[0].Close()
	next.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("after a slot freed: %q, %v", line, err)
	}
}
