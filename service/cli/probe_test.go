package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// serveReadyz answers /readyz with code on ln until the test ends.
func serveReadyz(t *testing.T, ln net.Listener, code int) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		w.Write([]byte("ready: state\n"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// listenOn opens a listener or fails the test.
func listenOn(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestProbeAnswers(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready.sock")
	serveReadyz(t, listenOn(t, "unix", ready), http.StatusOK)
	notReady := filepath.Join(dir, "not-ready.sock")
	serveReadyz(t, listenOn(t, "unix", notReady), http.StatusServiceUnavailable)
	tcp := listenOn(t, "tcp", "127.0.0.1:0")
	serveReadyz(t, tcp, http.StatusOK)

	for _, tc := range []struct {
		flag, addr string
		want       int
		msg        string
	}{
		{"--control", ready, ExitOK, "ready: state"},
		{"--admin", "unix:" + ready, ExitOK, "ready: state"},
		{"--control", notReady, ExitFailure, "answered 503"},
		{"--control", filepath.Join(dir, "absent.sock"), ExitFailure, "not ready"},
		// A TCP port is never asked: another program could answer there.
		{"--admin", tcp.Addr().String(), ExitFailure, "not asked: over TCP"},
	} {
		args := []string{"probe", tc.flag, tc.addr, "--timeout", "5s"}
		if tc.flag == "--admin" {
			args = append(args, "--control", "")
		}
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, args)
		if code != tc.want || !strings.Contains(out.String()+errOut.String(), tc.msg) {
			t.Errorf("probe %s %s: exit %d (want %d), stdout %q, stderr %q (want %q)", tc.flag, tc.addr, code, tc.want, out.String(), errOut.String(), tc.msg)
		}
	}
}

// A daemon socket that accepts but never answers must not hang the probe.
func TestProbeTimesOut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	ln := listenOn(t, "unix", sock)
	t.Cleanup(func() { ln.Close() })
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, []string{"probe", "--control", sock, "--admin", "unix:" + sock, "--timeout", "200ms"})
	}()
	if code := testutil.Await(t, done, 30*time.Second, "the probe to give up on a silent socket"); code != ExitFailure {
		t.Fatalf("probe of a silent socket: exit %d, want %d; stderr %q", code, ExitFailure, errOut.String())
	}
}

// A daemon from before the probe socket (a package upgrade not yet
// restarted) has only its control socket: the probe, left at its default,
// asks that next, before admin.listen.
func TestProbeFallsBackToTheControlSocket(t *testing.T) {
	runDir := t.TempDir()
	serveReadyz(t, listenOn(t, "unix", filepath.Join(runDir, "control.sock")), http.StatusOK)
	t.Setenv("RUNTIME_DIRECTORY", runDir)
	var out, errOut bytes.Buffer
	code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, []string{"probe", "--admin", "127.0.0.1:1", "--timeout", "5s"})
	if code != ExitOK || out.String() != "ready: state\n" {
		t.Errorf("probe with only control.sock: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// keepalived runs the probe with its own environment: under nixpkgs'
// keepalived unit (RuntimeDirectory=keepalived) $RUNTIME_DIRECTORY is
// /run/keepalived, which must not hide the daemon's sockets at their fixed
// path (the NixOS-shaped VM twin never got the VIP that way).
func TestProbeSocketsUnderKeepalivedsRuntimeDirectory(t *testing.T) {
	env := map[string]string{"RUNTIME_DIRECTORY": "/run/keepalived"}
	got := probeSockets(func(k string) string { return env[k] }, false)
	want := []string{"/run/keepalived/probe.sock", "/run/vipproxy/probe.sock", "/run/keepalived/control.sock", "/run/vipproxy/control.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("probeSockets with keepalived's RUNTIME_DIRECTORY = %q, want %q", got, want)
	}
	if got := probeSockets(func(string) string { return "" }, false); !slices.Equal(got, []string{"/run/vipproxy/probe.sock", "/run/vipproxy/control.sock"}) {
		t.Errorf("probeSockets without RUNTIME_DIRECTORY = %q", got)
	}
	// Root asks the control socket first: no other user can reach it.
	if got := probeSockets(func(string) string { return "" }, true); !slices.Equal(got, []string{"/run/vipproxy/control.sock", "/run/vipproxy/probe.sock"}) {
		t.Errorf("probeSockets as root = %q", got)
	}
}
