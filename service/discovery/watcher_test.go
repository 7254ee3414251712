package discovery

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// api is a real HTTPS server with the stand-in's EndpointSlices behind a
// switch that injects faults, and a record of who asked.
type api struct {
	t      *testing.T
	srv    *httptest.Server
	slices *standin.EndpointSlices
	pki    *testpki.Files
	fault  atomic.Pointer[string]

	mu      sync.Mutex
	tokens  []string
	certs   [][32]byte
	servers []string // TLS server names sent
}

func newAPI(t *testing.T) *api {
	t.Helper()
	pki := pkitest.New(t, "kubernetes")
	cfg, _ := pkitest.TLS(t, pki)
	// Token clients come without a certificate; the handler checks that
	// one of the two is there.
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	a := &api{t: t, slices: standin.NewEndpointSlices(), pki: pki}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.TLS = cfg
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *api) addr() string { return a.srv.Listener.Addr().String() }

func (a *api) setFault(f string) { a.fault.Store(&f) }

func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	a.tokens = append(a.tokens, tok)
	a.servers = append(a.servers, r.TLS.ServerName)
	if len(r.TLS.PeerCertificates) > 0 {
		a.certs = append(a.certs, sha256.Sum256(r.TLS.PeerCertificates[0].Raw))
	}
	a.mu.Unlock()
	if tok == "" && len(r.TLS.PeerCertificates) == 0 {
		http.Error(w, `{"kind":"Status","code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	watch := r.URL.Query().Get("watch") == "1"
	f := ""
	if p := a.fault.Load(); p != nil {
		f = *p
	}
	switch {
	case f == "forbidden":
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","code":403,"reason":"Forbidden","message":"endpointslices.discovery.k8s.io is forbidden: User \"vipproxy\" cannot list resource"}`)
		return
	case f == "garbage" && !watch:
		io.WriteString(w, `{"kind":"EndpointSliceList","metadata":{"resourceVersion":"5"},"items":[{"endpoints":`)
		return
	case f == "big" && !watch:
		io.WriteString(w, `{"kind":"EndpointSliceList","metadata":{"resourceVersion":"5"},"items":[],"pad":"`+strings.Repeat("x", 64<<10)+`"}`)
		return
	case f == "garbage-event" && watch:
		io.WriteString(w, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"kubernetes\"},\"addressType\":\"IPv4\",\"endpoints\":5}}\n")
		return
	case f == "big-event" && watch:
		io.WriteString(w, `{"type":"MODIFIED","object":{"pad":"`+strings.Repeat("x", 64<<10)+`"}}`+"\n")
		return
	case f == "short-watch" && watch:
		w.Header().Set("Content-Type", "application/json")
		return // 200 and an empty stream: a watch closed at once
	case f == "gone-watch" && watch:
		w.WriteHeader(http.StatusGone)
		io.WriteString(w, `{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}`)
		return
	case f == "cut" && watch:
		a.cut(w)
		return
	}
	if f == "ignore-field-selector" {
		// An old or odd server that answers as if no field selector was
		// given: every slice with the label comes back.
		q := r.URL.Query()
		q.Del("fieldSelector")
		r.URL.RawQuery = q.Encode()
	}
	a.slices.ServeHTTP(w, r)
}

// cut answers a watch with half an event, then closes the connection
// without ending the chunked body: an apiserver dying mid-stream.
func (a *api) cut(w http.ResponseWriter) {
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"kuber`)
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func (a *api) seen() (tokens []string, certs [][32]byte, servers []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.tokens), slices.Clone(a.certs), slices.Clone(a.servers)
}

// run starts a watcher and returns a channel of its member sets.
func run(t *testing.T, opts Options) (*Watcher, <-chan []Member) {
	t.Helper()
	ch := make(chan []Member, 100)
	opts.OnChange = func(m []Member) { ch <- m }
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.BackoffMin = cmpOr(opts.BackoffMin, 10*time.Millisecond)
	opts.BackoffMax = cmpOr(opts.BackoffMax, 50*time.Millisecond)
	w := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, ch
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitFor reads member sets until one has exactly these active and
// draining addresses (bounded: the test's deadline).
func waitFor(t *testing.T, ch <-chan []Member, active, draining []string) []Member {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-ch:
			var act, dr []string
			for _, x := range m {
				if x.Draining() {
					dr = append(dr, x.Addr.String())
				} else {
					act = append(act, x.Addr.String())
				}
			}
			if slices.Equal(act, active) && slices.Equal(dr, draining) {
				return m
			}
		case <-deadline:
			t.Fatalf("members never became active %v draining %v", active, draining)
		}
	}
}

// waitStatus polls the watcher until cond holds (bounded).
func waitStatus(t *testing.T, w *Watcher, what string, cond func(Status) bool) Status {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if s := w.Status(); cond(s) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("status never %s: %+v", what, w.Status())
	return Status{}
}

func certCreds(a *api) Credentials {
	return Credentials{CAFile: a.pki.CA, CertFile: a.pki.ClientCert, KeyFile: a.pki.ClientKey}
}

func TestAddRemoveDrainFlap(t *testing.T) {
	a := newAPI(t)
	x, y, z := ap("192.0.2.1:6443"), ap("192.0.2.2:6443"), ap("192.0.2.3:6443")
	a.slices.SetAddrs(x, y)
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()},
		Policy: Policy{Grace: time.Hour, Max: 10}, StatePath: filepath.Join(t.TempDir(), StateFile)})
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, nil)
	// add: a third apiserver joins
	a.slices.SetAddrs(x, y, z)
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443", "192.0.2.3:6443"}, nil)
	// remove: drains, keeps its place until the grace is over
	a.slices.SetAddrs(x, z)
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.3:6443"}, []string{"192.0.2.2:6443"})
	// not ready counts as removed
	a.slices.Set(standin.Endpoint{Addr: x}, standin.Endpoint{Addr: y}, standin.Endpoint{Addr: z, NotReady: true})
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, []string{"192.0.2.3:6443"})
	waitStatus(t, w, "watching", func(s Status) bool { return s.State == StateWatching && s.Server == a.addr() })
	_, _, servers := a.seen()
	for _, s := range servers {
		if s != DefaultServerName {
			t.Fatalf("TLS server name %q, want %q: the API is reached by address, verified by name", s, DefaultServerName)
		}
	}
}

func TestDrainEndsAfterGrace(t *testing.T) {
	a := newAPI(t)
	x, y := ap("192.0.2.1:6443"), ap("192.0.2.2:6443")
	a.slices.SetAddrs(x, y)
	_, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Grace: 50 * time.Millisecond}})
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, nil)
	a.slices.SetAddrs(x)
	waitFor(t, ch, []string{"192.0.2.1:6443"}, []string{"192.0.2.2:6443"})
	// no further event from the cluster: the timer ends the drain
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
}

func TestEmptyAnswerKeepsTheSet(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Grace: time.Hour}})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	a.slices.SetAddrs()
	a.slices.SetAddrs(ap("192.0.2.2:6443"))
	waitFor(t, ch, []string{"192.0.2.2:6443"}, []string{"192.0.2.1:6443"})
	a.slices.SetAddrs()
	// the next list (after the watch's resync) also answers empty
	a.slices.Expire()
	waitStatus(t, w, "listed again", func(s Status) bool { l, _ := a.slices.Requests(); return l >= 2 && s.State == StateWatching })
	if got := Active(w.Members()); len(got) != 1 || got[0] != ap("192.0.2.2:6443") {
		t.Fatalf("active after empty answers: %v", got)
	}
}

func TestGoneListsAgain(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Grace: time.Hour}})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	waitStatus(t, w, "watching", func(s Status) bool { return s.State == StateWatching })
	// The open watch gets an ERROR event with code 410; the next watch
	// from the old version would get HTTP 410; the watcher lists again.
	a.slices.Expire()
	waitStatus(t, w, "listed again", func(s Status) bool { l, _ := a.slices.Requests(); return l >= 2 })
	a.slices.SetAddrs(ap("192.0.2.1:6443"), ap("192.0.2.2:6443"))
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, nil)
	if s := w.Status(); s.LastError != "" {
		t.Errorf("410 counted as an error: %+v", s)
	}
}

func TestWatchFromExpiredVersionGetsHTTPGone(t *testing.T) {
	a := newAPI(t)
	c := client{creds: certCreds(a), timeout: 5 * time.Second, maxBody: 1 << 20, maxEvent: 1 << 20}
	v, rv, err := c.list(context.Background(), a.addr())
	if err != nil {
		t.Fatal(err)
	}
	a.slices.Expire()
	err = c.watch(context.Background(), a.addr(), v, rv, time.Second, func(string, bool) {})
	if err != errGone {
		t.Fatalf("watch from an expired version: %v, want errGone", err)
	}
}

// faultKeepsSet checks that a fault is recorded as the last error, the
// members stay as they were, and the watcher recovers once it ends.
func faultKeepsSet(t *testing.T, fault, wantErr string) {
	faultRecovers(t, fault, wantErr, false)
}

func TestGarbageJSON(t *testing.T)  { faultKeepsSet(t, "garbage", "read list") }
func TestOversizeBody(t *testing.T) { faultKeepsSet(t, "big", "larger than the bound") }
func TestCutStream(t *testing.T)    { watchFault(t, "cut", "watch stream: unexpected EOF") }
func TestGarbageEvent(t *testing.T) { watchFault(t, "garbage-event", "read ADDED event") }
func TestOversizeEvent(t *testing.T) {
	watchFault(t, "big-event", "watch stream: answer larger than the bound")
}

// watchFault is faultKeepsSet for a fault that hits the watch only.
func watchFault(t *testing.T, fault, wantErr string) {
	faultRecovers(t, fault, wantErr, true)
}

// faultRecovers sets fault on the API server, from the start (onWatch:
// the first list passes, the watch meets it) or after the first list
// (the open watch is ended so that the next list meets it).
func faultRecovers(t *testing.T, fault, wantErr string, onWatch bool) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	if onWatch {
		a.setFault(fault)
	}
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Grace: time.Hour},
		MaxBody: 32 << 10, MaxEvent: 32 << 10})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	if !onWatch {
		a.setFault(fault)
		a.slices.Expire() // the open watch ends; the next list meets the fault
	}
	s := waitStatus(t, w, "failed", func(s Status) bool { return strings.Contains(s.LastError, wantErr) })
	t.Logf("last error: %s", s.LastError)
	if got := w.Members(); len(got) != 1 || got[0].Draining() {
		t.Fatalf("members changed by a fault: %v", got)
	}
	a.setFault("")
	a.slices.SetAddrs(ap("192.0.2.2:6443"))
	waitFor(t, ch, []string{"192.0.2.2:6443"}, []string{"192.0.2.1:6443"})
}

func TestTokenRotated(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, "first-token\n")
	w, ch := run(t, Options{Credentials: Credentials{CAFile: a.pki.CA, TokenFile: tokenFile}, Seeds: []string{a.addr()},
		Policy: Policy{Grace: time.Hour}})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	writeFile(t, tokenFile, "second-token\n")
	a.slices.Expire()
	waitStatus(t, w, "listed again", func(Status) bool { l, _ := a.slices.Requests(); return l >= 2 })
	tokens, _, _ := a.seen()
	if tokens[0] != "first-token" || tokens[len(tokens)-1] != "second-token" {
		t.Fatalf("tokens sent: %q", tokens)
	}
}

func TestClientCertificateRotated(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	// A second PKI stands for the renewed certificate; the server trusts both CAs.
	renewed := pkitest.New(t)
	ca2, _ := os.ReadFile(renewed.CA)
	a.srv.TLS.ClientCAs.AppendCertsFromPEM(ca2)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	copyFile(t, a.pki.ClientCert, cert)
	copyFile(t, a.pki.ClientKey, key)
	w, ch := run(t, Options{Credentials: Credentials{CAFile: a.pki.CA, CertFile: cert, KeyFile: key}, Seeds: []string{a.addr()},
		Policy: Policy{Grace: time.Hour}})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	copyFile(t, renewed.ClientCert, cert)
	copyFile(t, renewed.ClientKey, key)
	a.slices.Expire()
	waitStatus(t, w, "listed again", func(Status) bool { l, _ := a.slices.Requests(); return l >= 2 })
	_, certs, _ := a.seen()
	if certs[0] != fingerprint(t, a.pki.ClientCert) || certs[len(certs)-1] != fingerprint(t, renewed.ClientCert) {
		t.Fatalf("the renewed certificate was not used")
	}
}

func TestThroughTheNextSeedWhenOneIsDown(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	dead := testutil.DeadAddress(t)
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{dead, a.addr()}, Policy: Policy{Grace: time.Hour}})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	waitStatus(t, w, "watching through the live seed", func(s Status) bool { return s.State == StateWatching && s.Server == a.addr() })
}

func TestLastKnownSetOnDisk(t *testing.T) {
	a := newAPI(t)
	state := filepath.Join(t.TempDir(), StateFile)
	a.slices.SetAddrs(ap("192.0.2.1:6443"), ap("192.0.2.2:6443"))
	_, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Grace: time.Hour}, StatePath: state})
	waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, nil)
	got, err := readState(state)
	if err != nil || len(got) != 2 {
		t.Fatalf("state file: %v %v", got, err)
	}
	// A restart with the API unreachable starts from the remembered set.
	w2 := New(Options{Credentials: certCreds(a), Seeds: []string{testutil.DeadAddress(t)}, StatePath: state})
	m := w2.Members()
	if len(m) != 2 || m[0].Source != Remembered || m[1].Addr != ap("192.0.2.2:6443") {
		t.Fatalf("remembered: %v", m)
	}
	// A broken file is ignored with a log line, never a failure.
	writeFile(t, state, "{not json")
	if m := New(Options{StatePath: state}).Members(); len(m) != 0 {
		t.Fatalf("members from a broken state file: %v", m)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

func fingerprint(t *testing.T, certFile string) [32]byte {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, strings.Replace(certFile, ".pem", "-key.pem", 1))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(leaf.Raw)
}

// ListOnce (vipproxy doctor) names the fix for a refusal.
func TestListOnceForbidden(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	eps, server, err := ListOnce(context.Background(), certCreds(a), []string{testutil.DeadAddress(t), a.addr()}, 5*time.Second)
	if err != nil || server != a.addr() || len(eps) != 1 {
		t.Fatalf("ListOnce: %v %q %v", eps, server, err)
	}
	a.setFault("forbidden")
	_, _, err = ListOnce(context.Background(), certCreds(a), []string{a.addr()}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "cannot list") || !strings.Contains(Fix(err), "rbac-discovery.yaml") {
		t.Fatalf("forbidden: %v; fix %q", err, Fix(err))
	}
}

// A note about the answer as a whole names no backend: the journal read
// `backend="invalid AddrPort"` for an answer with no usable endpoint.
func TestNotesNameABackendOnlyWhenTheyHaveOne(t *testing.T) {
	var out strings.Builder
	w := &Watcher{log: slog.New(slog.NewJSONHandler(&out, nil))}
	p := Policy{Grace: time.Hour, Max: 8}
	members, added := Merge(nil, []netip.AddrPort{ap("192.0.2.1:6443")}, time.Now(), p)
	_, kept := Merge(members, nil, time.Now(), p)
	w.logNotes(append(added, kept...))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 log lines, got %q", out.String())
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		backend, named := rec["backend"]
		switch rec["msg"] {
		case "discovered backends kept":
			if named {
				t.Errorf("the kept note names a backend: %q", line)
			}
		case "discovered backend added":
			if backend != "192.0.2.1:6443" {
				t.Errorf("the added note names backend %v: %q", backend, line)
			}
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
}
