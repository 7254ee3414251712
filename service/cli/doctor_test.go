package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// anonOffApiservers starts n stand-in apiservers that serve as
// kube-apiserver --anonymous-auth=false does.
func anonOffApiservers(t *testing.T, pki *testpki.Files, n int) []*standin.Server {
	t.Helper()
	var out []*standin.Server
	for i := range n {
		tlsConf, err := pki.ServerTLS()
		if err != nil {
			t.Fatal(err)
		}
		s, err := standin.New(standin.Options{Name: fmt.Sprint("api", i), Listen: "127.0.0.1:0", TLS: tlsConf, AnonymousOff: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// doctorConfig is a loopback VIP over the apiservers with the default
// https check and the given [health] credential lines.
func doctorConfig(t *testing.T, apis []*standin.Server, vipPort int, admin, creds string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n[admin]\nlisten = %q\n", vipPort, admin)
	for i, a := range apis {
		fmt.Fprintf(&b, "[[backend]]\nname = \"b%d\"\naddress = %q\n", i, a.Addr())
	}
	period := testutil.CheckPeriod(200 * time.Millisecond)
	fmt.Fprintf(&b, "[health]\ninterval = %q\ntimeout = %q\n%s", period, period, creds)
	return b.String()
}

// doctor names the cause and the fix of what keeps the VIP from serving
// against apiservers with anonymous auth off: without credentials it
// fails because readiness is unverified, and only warns once the config
// accepts that (health.accept_unverified); with credentials the
// apiservers refuse it fails the backends (no healthy backend on the
// port, 401 named, the fix for the credential) and the daemon (not
// ready, each backend's error); with no daemon it fails saying so. The
// daemon is asked over TCP, named with --admin.
func TestDoctorNamesCauseAndFix(t *testing.T) {
	pki, other := newPKI(t), newPKI(t)
	apis := anonOffApiservers(t, pki, 2)
	doctor := func(path, admin string) (string, int) {
		t.Helper()
		out, errOut, code := runBin(t, "doctor", "--config", path, "--control", "", "--admin", admin, "--only", "daemon,backends,vip-answers")
		return out + errOut, code
	}

	vipPort, admin := testutil.FreePort(t), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path, logs, cmd := startDaemon(t, doctorConfig(t, apis, vipPort, admin, fmt.Sprintf("ca_file = %q\n", pki.CA)))
	var out string
	var code int
	// Ready takes one healthy backend; the second's first check may come
	// a moment later (seen: the doctor ran in between, "1/2").
	const bothReady = "PASS daemon     the daemon is ready: 2/2 backends healthy"
	testutil.WaitFor(t, "doctor to see the daemon ready with both backends", func() bool {
		out, code = doctor(path, admin)
		return strings.Contains(out, bothReady)
	})
	for _, want := range []string{
		bothReady,
		fmt.Sprintf("FAIL backends   port api (%d): 2 of 2 backends answer, readiness unverified", vipPort),
		"fix: let anonymous clients read /readyz, /livez and /healthz alone (kube-apiserver --authentication-config",
		"or give [health] ca_file + cert_file + key_file (or token_file)",
		"or accept unverified readiness: [health] accept_unverified = true",
		fmt.Sprintf("PASS vip-answers VIP 127.0.0.1 is on loopback: this node's own and answers on port %d", vipPort),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor without credentials lacks %q:\n%s\ndaemon log:\n%s", want, out, logs())
		}
	}
	if code != ExitFailure {
		t.Errorf("doctor with readiness unverified: exit %d, want %d", code, ExitFailure)
	}
	accepted := filepath.Join(t.TempDir(), "accepted.toml")
	if err := os.WriteFile(accepted, []byte(doctorConfig(t, apis, vipPort, admin, fmt.Sprintf("ca_file = %q\naccept_unverified = true\n", pki.CA))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = doctor(accepted, admin)
	if want := fmt.Sprintf("WARN backends   port api (%d): 2 of 2 backends answer, readiness unverified (accepted: health.accept_unverified)", vipPort); !strings.Contains(out, want) || code != 0 {
		t.Errorf("doctor with unverified readiness accepted: exit %d (want 0), lacks %q:\n%s", code, want, out)
	}
	cmd.Process.Kill()
	cmd.Wait()

	if out, code := doctor(path, admin); code != ExitFailure || !strings.Contains(out, "FAIL daemon     the daemon does not answer") ||
		!strings.Contains(out, "fix: systemctl status vipproxy.socket vipproxy.service") {
		t.Errorf("doctor without a daemon: exit %d\n%s", code, out)
	}

	refused := fmt.Sprintf("ca_file = %q\ncert_file = %q\nkey_file = %q\n", pki.CA, other.ClientCert, other.ClientKey)
	admin = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path, logs, _ = startDaemon(t, doctorConfig(t, apis, testutil.FreePort(t), admin, refused))
	testutil.WaitFor(t, "doctor to see the daemon not ready", func() bool {
		out, code = doctor(path, admin)
		return strings.Contains(out, "FAIL daemon     the daemon is not ready (not ready: 0/2")
	})
	for _, want := range []string{
		"keepalived's track script fails, so this node cannot hold the VIP; b0 (" + apis[0].Addr() + ") down: https GET /readyz: status 401 Unauthorized",
		"has no healthy backend: all 2 fail the https (GET /readyz, want 200) check: b0 (" + apis[0].Addr() + "): https GET /readyz: status 401 Unauthorized: the apiserver refused the check's credentials",
		"fix: point [health] cert_file/key_file or token_file at a current credential the apiserver takes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor with refused credentials lacks %q:\n%s\ndaemon log:\n%s", want, out, logs())
		}
	}
	if code != ExitFailure {
		t.Errorf("doctor with refused credentials: exit %d, want %d", code, ExitFailure)
	}
}

func newPKI(t *testing.T) *testpki.Files {
	t.Helper()
	return pkitest.New(t)
}
