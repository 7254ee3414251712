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
	ready := listenOn(t, "tcp", "127.0.0.1:0")
	serveReadyz(t, ready, http.StatusOK)
	notReady := listenOn(t, "tcp", "127.0.0.1:0")
	serveReadyz(t, notReady, http.StatusServiceUnavailable)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	serveReadyz(t, listenOn(t, "unix", sock), http.StatusOK)
	closed := listenOn(t, "tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		addr string
		want int
		msg  string
	}{
		{ready.Addr().String(), ExitOK, "ready: state"},
		{"unix:" + sock, ExitOK, "ready: state"},
		{notReady.Addr().String(), ExitFailure, "answered 503"},
		{closedAddr, ExitFailure, "not ready"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, []string{"probe", "--admin", tc.addr, "--timeout", "5s"})
		if code != tc.want || !strings.Contains(out.String()+errOut.String(), tc.msg) {
			t.Errorf("probe %s: exit %d (want %d), stdout %q, stderr %q (want %q)", tc.addr, code, tc.want, out.String(), errOut.String(), tc.msg)
		}
	}
}

// A server that accepts but never answers must not hang the probe.
func TestProbeTimesOut(t *testing.T) {
	addr := testutil.ServeAddr(t, testutil.Silent)
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), Env{Stdout: &out, Stderr: &errOut}, []string{"probe", "--admin", addr, "--timeout", "200ms"})
	}()
	select {
	case code := <-done:
		if code != ExitFailure {
			t.Fatalf("probe of a silent server: exit %d, want %d; stderr %q", code, ExitFailure, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("probe did not give up on a silent server")
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
	got := probeSockets(func(k string) string { return env[k] })
	want := []string{"/run/keepalived/probe.sock", "/run/vipproxy/probe.sock", "/run/keepalived/control.sock", "/run/vipproxy/control.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("probeSockets with keepalived's RUNTIME_DIRECTORY = %q, want %q", got, want)
	}
	if got := probeSockets(func(string) string { return "" }); !slices.Equal(got, []string{"/run/vipproxy/probe.sock", "/run/vipproxy/control.sock"}) {
		t.Errorf("probeSockets without RUNTIME_DIRECTORY = %q", got)
	}
}
