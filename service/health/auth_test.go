package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
)

// anonOff stands in for a kube-apiserver started with
// --anonymous-auth=false: it asks for a client certificate without
// requiring one (as kube-apiserver does), and answers 401 to a request
// with neither a certificate from its CA nor its current bearer token.
// An authenticated /readyz answers ready (200 or 500); refuse makes it
// answer 403 to authenticated requests (an authorizer that says no);
// anonStatus is what an unauthenticated one gets (401, or 403 where
// anonymous auth is on but RBAC grants it nothing).
type anonOff struct {
	addr       string
	token      atomic.Value // string
	ready      atomic.Int32 // the status of an authenticated /readyz
	anonStatus atomic.Int32
	refuse     atomic.Bool
}

func newAnonOff(t *testing.T, pki *testpki.Files) *anonOff {
	t.Helper()
	a := &anonOff{}
	a.token.Store("")
	a.ready.Store(http.StatusOK)
	a.anonStatus.Store(http.StatusUnauthorized)
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(pki.CA)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("read CA: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !a.authenticated(r, pool):
			http.Error(w, `{"kind":"Status","status":"Failure"}`, int(a.anonStatus.Load()))
		case a.refuse.Load():
			http.Error(w, "forbidden", http.StatusForbidden)
		default:
			w.WriteHeader(int(a.ready.Load()))
		}
	}))
	serverTLS, err := pki.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS.ClientAuth = tls.RequestClientCert // verified per request, as the apiserver's authenticator does
	srv.TLS = serverTLS
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a.addr = srv.Listener.Addr().String()
	return a
}

func (a *anonOff) authenticated(r *http.Request, pool *x509.CertPool) bool {
	if tok := a.token.Load().(string); tok != "" && r.Header.Get("Authorization") == "Bearer "+tok {
		return true
	}
	certs := r.TLS.PeerCertificates
	if len(certs) == 0 {
		return false
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func probeOnce(t *testing.T, cfg config.Health, addr string) error {
	t.Helper()
	p, err := NewProber(cfg)
	if err != nil {
		t.Fatalf("NewProber: %v", err)
	}
	return p.Probe(context.Background(), addr)
}

// Against an apiserver with anonymous auth off, the default https check
// without credentials passes, unverified, on 401 and on 403; with a
// client certificate it verifies readiness (a failing /readyz fails) and
// a refusal (401 from another CA's certificate, 403) fails.
func TestHTTPSCheckWithAnonymousAuthOff(t *testing.T) {
	pki, other := newTestPKI(t), newTestPKI(t)
	api := newAnonOff(t, pki)
	anon := healthConfig(config.CheckHTTPS)
	anon.CAFile = pki.CA
	withCert := anon
	withCert.CertFile, withCert.KeyFile = pki.ClientCert, pki.ClientKey
	foreignCert := anon
	foreignCert.CertFile, foreignCert.KeyFile = other.ClientCert, other.ClientKey

	err := probeOnce(t, anon, api.addr)
	if !Passed(err) || !IsUnverified(err) || !strings.Contains(err.Error(), "answered 401 Unauthorized") {
		t.Errorf("no credentials, 401: %v; want an unverified pass", err)
	}
	if err := probeOnce(t, withCert, api.addr); err != nil {
		t.Errorf("client certificate, ready: %v", err)
	}
	api.ready.Store(http.StatusInternalServerError)
	if err := probeOnce(t, withCert, api.addr); Passed(err) || !strings.Contains(err.Error(), "status 500") {
		t.Errorf("client certificate, /readyz failing: %v; want a failure", err)
	}
	if err := probeOnce(t, anon, api.addr); !IsUnverified(err) {
		t.Errorf("no credentials, /readyz failing but hidden behind 401: %v; want unverified", err)
	}
	api.ready.Store(http.StatusOK)
	if err := probeOnce(t, foreignCert, api.addr); Passed(err) || !strings.Contains(err.Error(), "401 Unauthorized: the apiserver refused the check's credentials") {
		t.Errorf("refused client certificate: %v; want a failure naming the refusal", err)
	}
	api.refuse.Store(true)
	api.anonStatus.Store(http.StatusForbidden)
	if err := probeOnce(t, anon, api.addr); !IsUnverified(err) || !strings.Contains(err.Error(), "403") {
		t.Errorf("no credentials, 403: %v; want unverified", err)
	}
	if err := probeOnce(t, withCert, api.addr); Passed(err) || !strings.Contains(err.Error(), "403 Forbidden") {
		t.Errorf("client certificate, 403: %v; want a failure", err)
	}
}

// A bearer token from health.token_file is read again when the file
// changes: a rotated token keeps the check verified without a reload, and
// a token the apiserver does not take fails it.
func TestHTTPSCheckTokenRotation(t *testing.T) {
	pki := newTestPKI(t)
	api := newAnonOff(t, pki)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(tok string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(tokenFile, at, at) // a new mtime even within the file system's clock tick
	}
	now := time.Now()
	writeToken("first", now)
	api.token.Store("first")
	cfg := healthConfig(config.CheckHTTPS)
	cfg.CAFile, cfg.TokenFile = pki.CA, tokenFile
	p, err := NewProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Probe(ctx, api.addr); err != nil {
		t.Fatalf("first token: %v", err)
	}
	api.token.Store("second")
	if err := p.Probe(ctx, api.addr); Passed(err) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a token the apiserver no longer takes: %v; want a 401 failure", err)
	}
	writeToken("second", now.Add(time.Second))
	if err := p.Probe(ctx, api.addr); err != nil {
		t.Fatalf("rotated token: %v", err)
	}
	os.Remove(tokenFile) // mid-rotation: the last good token serves
	if err := p.Probe(ctx, api.addr); err != nil {
		t.Fatalf("token file gone for a moment: %v", err)
	}
}

// The client certificate is read again when its files change.
func TestHTTPSCheckClientCertificateRotation(t *testing.T) {
	pki, other := newTestPKI(t), newTestPKI(t)
	api := newAnonOff(t, pki)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	install := func(f *testpki.Files, at time.Time) {
		t.Helper()
		for src, dst := range map[string]string{f.ClientCert: certFile, f.ClientKey: keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(dst, at, at)
		}
	}
	now := time.Now()
	install(other, now) // signed by a CA the apiserver does not know
	cfg := healthConfig(config.CheckHTTPS)
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = pki.CA, certFile, keyFile
	p, err := NewProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Probe(context.Background(), api.addr); Passed(err) {
		t.Fatalf("certificate from an unknown CA: %v; want a failure", err)
	}
	install(pki, now.Add(time.Second))
	if err := p.Probe(context.Background(), api.addr); err != nil {
		t.Fatalf("after the certificate was replaced: %v", err)
	}
}

// A wedged apiserver completes the TLS handshake and never answers: the
// check without credentials still fails (an unverified pass needs an
// HTTP answer).
func TestHTTPSCheckWedgedAfterHandshakeFails(t *testing.T) {
	pki := newTestPKI(t)
	serverTLS, err := pki.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	serverTLS.ClientAuth = tls.RequestClientCert
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				io.Copy(io.Discard, c) // reads the request, never answers
				c.Close()
			}()
		}
	}()
	cfg := healthConfig(config.CheckHTTPS)
	cfg.CAFile = pki.CA
	cfg.Timeout = config.Duration{Duration: 300 * time.Millisecond}
	err = probeOnce(t, cfg, ln.Addr().String())
	if Passed(err) || !strings.Contains(err.Error(), "health.timeout 300ms") {
		t.Fatalf("wedged apiserver: %v; want a timeout failure", err)
	}
}

// The checker reports an unverified check as passed, shows why in its status,
// and logs one WARN line with the fix for it, not one per check.
func TestUnverifiedBackendIsUpAndLoggedOnce(t *testing.T) {
	pki := newTestPKI(t)
	api := newAnonOff(t, pki)
	cfg := healthConfig(config.CheckHTTPS)
	cfg.CAFile = pki.CA
	c, rec, buf := runLogged(t, cfg, nil, slog.LevelInfo, Target{"api1", api.addr})
	testutil.WaitFor(t, "five checks", func() bool { return len(rec.of("api1")) >= 5 })
	s := stateOf(c, "api1")
	if rec.last("api1") != Pass || s.LastError != "" || !strings.Contains(s.Unverified, "answered 401") {
		t.Errorf("status %+v, outcome %v: want passed, no error, unverified", s, rec.last("api1"))
	}
	var warns []string
	for _, l := range buf.lines() {
		if strings.Contains(l, "readiness unverified") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "level=WARN") || !strings.Contains(warns[0], "client-kubelet.crt") {
		t.Errorf("want one WARN line with the fix, got %d:\n%s", len(warns), strings.Join(warns, "\n"))
	}
}
