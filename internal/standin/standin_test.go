package standin

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
)

// start runs a stand-in on a free loopback port with a fresh PKI.
func start(t *testing.T, opts Options) (*Server, *testpki.Files) {
	t.Helper()
	files := pkitest.New(t)
	if opts.TLS == nil && !opts.Hang {
		opts.TLS, _ = pkitest.TLS(t, files)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Close() })
	return srv, files
}

func client(t *testing.T, files *testpki.Files) *http.Client {
	t.Helper()
	conf, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: conf}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestNameAndReadyz(t *testing.T) {
	srv, files := start(t, Options{Name: "cp1"})
	c := client(t, files)
	base := "https://" + srv.Addr()
	if code, body := get(t, c, base+"/name"); code != 200 || body != "cp1\n" {
		t.Fatalf("/name = %d %q", code, body)
	}
	if code, body := get(t, c, base+"/readyz"); code != 200 || body != "ok" {
		t.Fatalf("/readyz = %d %q; want 200 ok", code, body)
	}
	srv.SetReady(false)
	if code, _ := get(t, c, base+"/readyz"); code != 500 {
		t.Fatalf("/readyz after SetReady(false) = %d; want 500", code)
	}
	srv.SetReady(true)
	if code, _ := get(t, c, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz after SetReady(true) = %d; want 200", code)
	}
}

// A /readyz that waits (SetReadyzDelay) and whose client gives up gets
// no answer: before, the handler returned and net/http sent an empty 200,
// which a health check reading at its deadline took for a pass (a flaky
// TestLastResortStreamKeptUntilAnotherIsUp, 2026-12-02). The client here
// sends its request and then its TLS close_notify, as a checker's close
// at its timeout does; the server must close without a status line.
func TestDelayedReadyzGivenUpGetsNoAnswer(t *testing.T) {
	srv, files := start(t, Options{Name: "a"})
	srv.SetReadyzDelay(time.Hour)
	conf, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", srv.Addr(), conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the handler is waiting by now
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if len(got) > 0 {
		t.Fatalf("the given-up /readyz was answered: %q", got)
	}
	if err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("after the close_notify: %v, want the connection closed", err)
	}
}

func TestFailFileAndReadyFile(t *testing.T) {
	dir := t.TempDir()
	failFile, readyFile := filepath.Join(dir, "fail"), filepath.Join(dir, "ready")
	srv, files := start(t, Options{Name: "cp1", FailFile: failFile, ReadyFile: readyFile})
	c := client(t, files)
	url := "https://" + srv.Addr() + "/readyz"
	if code, _ := get(t, c, url); code != 500 {
		t.Fatalf("/readyz without the ready file = %d; want 500", code)
	}
	if err := os.WriteFile(readyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, c, url); code != 200 {
		t.Fatalf("/readyz with the ready file = %d; want 200", code)
	}
	if err := os.WriteFile(failFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, c, url); code != 500 {
		t.Fatalf("/readyz with the fail file = %d; want 500", code)
	}
}

// TestMTLSRequired: without a client certificate, or with one from another
// CA, no request gets through.
func TestMTLSRequired(t *testing.T) {
	srv, files := start(t, Options{Name: "cp1"})
	noCertTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	noCertTLS.Certificates = nil // verifies the server, presents nothing
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: noCertTLS}, Timeout: 10 * time.Second}
	if resp, err := noCert.Get("https://" + srv.Addr() + "/name"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %s", resp.Status)
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("error %v does not say the certificate is missing", err)
	}

	other := pkitest.New(t)
	otherCert, err := tls.LoadX509KeyPair(other.ClientCert, other.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	foreign := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: noCertTLS.RootCAs, Certificates: []tls.Certificate{otherCert}}}, Timeout: 10 * time.Second}
	if resp, err := foreign.Get("https://" + srv.Addr() + "/name"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client with a certificate from another CA got %s", resp.Status)
	}
	if code, _ := get(t, client(t, files), "https://"+srv.Addr()+"/name"); code != 200 {
		t.Fatalf("the right client certificate got %d", code)
	}
}

// TestAnonymousOff: as kube-apiserver --anonymous-auth=false, a client
// without a certificate completes the handshake and gets 401 on every
// path, /readyz included; the client certificate gets through.
func TestAnonymousOff(t *testing.T) {
	srv, files := start(t, Options{Name: "cp1", AnonymousOff: true})
	noCertTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	noCertTLS.Certificates = nil
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: noCertTLS}, Timeout: 10 * time.Second}
	for _, path := range []string{"/readyz", "/name"} {
		if code, body := get(t, noCert, "https://"+srv.Addr()+path); code != 401 || !strings.Contains(body, `"reason":"Unauthorized"`) {
			t.Errorf("%s without a certificate: %d %q; want 401 Unauthorized", path, code, body)
		}
	}
	if code, body := get(t, client(t, files), "https://"+srv.Addr()+"/readyz"); code != 200 {
		t.Errorf("/readyz with the client certificate: %d %q", code, body)
	}
	other := pkitest.New(t)
	if code, _ := get(t, client(t, &testpki.Files{CA: files.CA, ClientCert: other.ClientCert, ClientKey: other.ClientKey}), "https://"+srv.Addr()+"/readyz"); code != 401 {
		t.Errorf("/readyz with a certificate from another CA: %d, want 401 (as kube-apiserver: refused by the authenticator, not the handshake)", code)
	}
}

// TestWatchStreams reads several lines of /watch, then checks that Close
// ends the stream (a killed apiserver ends its watches).
func TestWatchStreams(t *testing.T) {
	srv, files := start(t, Options{Name: "cp2", WatchInterval: 20 * time.Millisecond})
	resp, err := client(t, files).Get("https://" + srv.Addr() + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v; want chunked", resp.TransferEncoding)
	}
	lines := bufio.NewScanner(resp.Body)
	for i := range 5 {
		if !lines.Scan() {
			t.Fatalf("stream ended after %d lines: %v", i, lines.Err())
		}
		if want := fmt.Sprintf("cp2 %d", i); lines.Text() != want {
			t.Fatalf("line %d = %q; want %q", i, lines.Text(), want)
		}
	}
	srv.Close()
	for lines.Scan() { // bounded: the client timeout is 10 s
	}
	if err := lines.Err(); err != nil && strings.Contains(err.Error(), "Client.Timeout") {
		t.Fatalf("stream did not end when the server closed: %v", err)
	}
}

// TestHangAcceptsButNeverAnswers: a TCP connect succeeds, a TLS handshake
// never completes.
func TestHangAcceptsButNeverAnswers(t *testing.T) {
	srv, _ := start(t, Options{Name: "wedged", Hang: true})
	conn, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("TCP connect to a hanging stand-in: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(300 * time.Millisecond))
	err = tls.Client(conn, &tls.Config{InsecureSkipVerify: true}).Handshake()
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("handshake = %v; want a timeout", err)
	}
}
