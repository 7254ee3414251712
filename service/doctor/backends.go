package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/health"
)

// backendFix is what to do about a backend that fails its check for a
// reason of its own.
const backendFix = "check those apiservers (systemctl status, journalctl; firewall: they must accept this node on their port); `vipproxy status` shows what the daemon sees"

// checkBackends runs the daemon's own health check (the port's
// [port.health], else [health]) against every backend on every port the
// VIP serves: one result per port.
func checkBackends(ctx context.Context, h Host, cfg *config.Valid) []Result {
	cfg = withSources(ctx, h, cfg)
	backends := backendsToCheck(ctx, h, cfg)
	var out []Result
	for _, p := range cfg.ServedPorts() {
		out = append(out, checkPort(ctx, h, p, backends))
	}
	return out
}

// backendsToCheck are the static backends and, when the daemon answers,
// the ones it discovered or remembered: a port whose seeds are gone but
// whose discovered apiservers serve has healthy backends.
func backendsToCheck(ctx context.Context, h Host, cfg *config.Valid) []config.Backend {
	out := slices.Clone(cfg.Backends)
	st, err := daemonStatus(ctx, h)
	if err != nil {
		return out
	}
	seen := map[string]bool{}
	for _, b := range out {
		seen[b.Address] = true
	}
	for _, b := range st.Backends {
		if b.Source == "static" || b.Source == "" {
			continue
		}
		d := cfg.DiscoveredBackend(b.Address)
		if !seen[d.Address] {
			seen[d.Address] = true
			out = append(out, d)
		}
	}
	return out
}

// probed is one backend's check result on one port.
type probed struct {
	name, addr string
	err        error
}

func checkPort(ctx context.Context, h Host, p config.Port, backends []config.Backend) Result {
	label := fmt.Sprintf("port %s (%d)", p.Name, p.Port)
	prober, err := health.NewProber(p.Health)
	if err != nil {
		return fail("fix the files the health table names; `vipproxy check` says which", "%s: cannot run the %s check: %v", label, p.Health.Type, err)
	}
	results := make([]probed, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		results[i] = probed{name: b.Name, addr: p.BackendAddress(b)}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, max(p.Health.Timeout.Duration, h.DialTimeout))
			defer cancel()
			results[i].err = prober.Probe(pctx, results[i].addr)
		})
	}
	wg.Wait()
	return judgePort(label, checkName(p.Health), results, p.Health.UnverifiedFails())
}

// checkName says what the check does, for the reader.
func checkName(hc config.Health) string {
	switch hc.Type {
	case config.CheckHTTPS:
		return fmt.Sprintf("https (GET %s, want %d)", hc.Path, hc.ExpectStatus)
	case config.CheckTLS:
		return "tls (handshake)"
	}
	return "tcp (connect)"
}

// judgePort turns a port's results into PASS, FAIL, or for backends
// whose readiness is unverified FAIL unless unverifiedFails is false
// (accepted: WARN), naming the backends and the fix.
func judgePort(label, check string, rs []probed, unverifiedFails bool) Result {
	var failed, unverified []string
	refused := false
	for _, r := range rs {
		switch {
		case health.IsUnverified(r.err):
			unverified = append(unverified, r.name)
		case r.err != nil:
			failed = append(failed, fmt.Sprintf("%s (%s): %v", r.name, r.addr, r.err))
			var re *health.Refused
			refused = refused || errors.As(r.err, &re)
		}
	}
	fix := backendFix
	if refused {
		fix = health.RefusedFix
	}
	switch {
	case len(rs) > 0 && len(failed) == len(rs):
		return fail(fix, "%s has no healthy backend: all %d fail the %s check: %s", label, len(rs), check, strings.Join(failed, "; "))
	case len(failed) > 0:
		return fail(fix, "%s: %d of %d backends fail the %s check: %s", label, len(failed), len(rs), check, strings.Join(failed, "; "))
	case len(unverified) > 0 && unverifiedFails:
		return fail(health.UnverifiedFix, "%s: %d of %d backends answer, readiness unverified: they refuse a check without credentials (401/403, anonymous auth off), so one whose /readyz fails (etcd down) would still be used: %s",
			label, len(unverified), len(rs), strings.Join(unverified, ", "))
	case len(unverified) > 0:
		return warn(health.CredentialsFix, "%s: %d of %d backends answer, readiness unverified (accepted: health.accept_unverified): they refuse a check without credentials (401/403, anonymous auth off), so one whose /readyz fails would still be used: %s",
			label, len(unverified), len(rs), strings.Join(unverified, ", "))
	}
	return pass("%s: all %d backends pass the %s check", label, len(rs), check)
}

// daemonStatus reads the running daemon's /status.
func daemonStatus(ctx context.Context, h Host) (admin.Status, error) {
	var st admin.Status
	if h.Daemon == nil {
		return st, errors.New("no way to ask the daemon here")
	}
	body, code, err := h.Daemon(ctx, "/status")
	if err != nil {
		return st, err
	}
	if code != 200 {
		return st, fmt.Errorf("/status answered %d: %s", code, strings.TrimSpace(body))
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return st, fmt.Errorf("/status is not the daemon's JSON: %w", err)
	}
	return st, nil
}
