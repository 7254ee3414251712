package daemon_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/standin"
)

// Apiservers with anonymous auth off (k3s, RKE2) answer 401 to the
// default https check when it has no credentials: every backend is up,
// clients get through, the probe passes, and the operator is told that
// readiness is unverified (/status, the metric, one WARN line per
// backend). With a client certificate the same check verifies readiness
// and a failing /readyz marks its backend down.
func TestAnonymousAuthOffApiservers(t *testing.T) {
	anonOff := func(o *standin.Options) { o.AnonymousOff = true }
	a, b := backend(t, "a", anonOff), backend(t, "b", anonOff)

	t.Run("no credentials", func(t *testing.T) {
		s := newSettings(t, a.Addr(), b.Addr())
		s.Check, s.Anonymous = "https", true
		p := startVIPProxy(t, s, runtimeDir(t))
		p.waitState("b0", "up")
		p.waitState("b1", "up")
		for _, bs := range p.status().Backends {
			if bs.Verified || !strings.Contains(bs.Unverified, "answered 401") || bs.LastError != "" {
				t.Errorf("/status of %s: %+v; want unverified, no error", bs.Name, bs)
			}
		}
		for _, n := range []string{"b0", "b1"} {
			if v, _ := seriesValue(p.scrape(), "vipproxy_health_check_unverified", "backend", n); v != 1 {
				t.Errorf("vipproxy_health_check_unverified{backend=%q} = %v, want 1", n, v)
			}
		}
		if got, err := name(mtlsClient(t, true), p.vip); err != nil || (got != "a" && got != "b") {
			t.Errorf("request through the VIP: %q %v", got, err)
		}
		if out, err := p.probe(); err != nil {
			t.Errorf("probe: %v\n%s", err, out)
		}
		out, _ := exec.Command(filepath.Join(binDir, "vipproxy"), "status", "--config", p.cfgPath, "--control", "", "--admin", p.admin).CombinedOutput()
		if !strings.Contains(string(out), "up (unverified)") || !strings.Contains(string(out), "readiness of 2 backend(s) unverified") ||
			!strings.Contains(string(out), "fix: let anonymous clients read /readyz, /livez and /healthz alone") {
			t.Errorf("vipproxy status does not say readiness is unverified:\n%s", out)
		}
		p.waitFor(func() bool { return strings.Count(p.log.String(), "readiness unverified") >= 2 }, "the warnings")
		if n := strings.Count(p.log.String(), "backend readiness unverified"); n != 2 || !strings.Contains(p.log.String(), "rancher/k3s/agent/client-kubelet.crt") ||
			!strings.Contains(p.log.String(), "let anonymous clients read /readyz, /livez and /healthz alone (kube-apiserver --authentication-config") {
			t.Errorf("%d warnings, want one per backend naming the anonymous health endpoints and where k3s keeps a client certificate", n)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		s := newSettings(t, a.Addr(), b.Addr())
		s.Check = "https"
		p := startVIPProxy(t, s, nil)
		p.waitState("b0", "up")
		p.waitState("b1", "up")
		p.waitFor(func() bool { st := p.status(); return st.Backends[0].Verified && st.Backends[1].Verified }, "both verified")
		b.SetReady(false)
		t.Cleanup(func() { b.SetReady(true) })
		p.waitState("b1", "down")
		if v, _ := seriesValue(p.scrape(), "vipproxy_health_check_unverified", "backend", "b0"); v != 0 {
			t.Errorf("vipproxy_health_check_unverified{backend=b0} = %v with a client certificate, want 0", v)
		}
		if strings.Contains(p.log.String(), "readiness unverified") {
			t.Error("a verified check warned of unverified readiness")
		}
	})
}
