package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// scrape reads the running daemon's /metrics with Prometheus' own parser.
func (p *proc) scrape() map[string]*dto.MetricFamily {
	p.t.Helper()
	body, err := p.get("/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		p.t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// seriesValue finds the value of the series of name whose labels include want
// (a histogram's sample count).
func seriesValue(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// netlinkSeries is read by a netlink address dump at scrape time, which
// qemu-user (make test-multiarch) does not carry out: the series is absent
// there (measured on arm64), and present on every real kernel.
const netlinkSeries = "vipproxy_vip_held"

// bgpSeries is exported by bgp-mode daemons only (TestBGPModeMetrics),
// not by the vrrp-mode daemon TestMonitoringUsesExportedMetrics runs.
const bgpSeries = "vipproxy_bgp_announced"

// The series Prometheus users look for, from a running daemon: build info,
// reload result and time, backend state, transitions and last change,
// dial latency, the VIP, and labelled series that start at 0.
func TestMetricsOfARunningDaemon(t *testing.T) {
	a := backend(t, "a")
	s := newSettings(t, a.Addr())
	s.Check = "https" // so that SetReady(false) fails it
	// A check's timeout is its interval; the test counts failures, and a
	// TLS handshake under qemu-user took over 200 ms (1 run in 4).
	s.Interval = "1s"
	p := startVIPProxy(t, s, nil)
	p.waitState("b0", "up")
	if _, err := name(mtlsClient(t, true), p.vip); err != nil {
		t.Fatal(err)
	}
	fams := p.scrape()
	type want struct {
		name   string
		labels []string
		check  func(float64) bool
		what   string
	}
	one, zero := func(v float64) bool { return v == 1 }, func(v float64) bool { return v == 0 }
	positive := func(v float64) bool { return v > 0 }
	wants := []want{
		{"vipproxy_build_info", []string{"version", testVersion, "revision", testCommit}, one, "1 with the version and commit the build set"},
		{"vipproxy_config_last_reload_successful", nil, one, "1"},
		{"vipproxy_config_last_reload_success_timestamp_seconds", nil, positive, "> 0"},
		{"vipproxy_backend_state", []string{"backend", "b0", "state", "up"}, one, "1"},
		{"vipproxy_backend_state", []string{"backend", "b0", "state", "down"}, zero, "0"},
		{"vipproxy_backend_state", []string{"backend", "b0", "state", "unknown"}, zero, "0"},
		{"vipproxy_backend_state", []string{"backend", "b0", "state", "starting"}, zero, "0"},
		{"vipproxy_backend_transitions_total", []string{"backend", "b0"}, one, "1 (starting to up)"},
		{"vipproxy_backend_last_transition_timestamp_seconds", []string{"backend", "b0"}, positive, "> 0"},
		{"vipproxy_dial_duration_seconds", []string{"backend", "b0"}, positive, "a dial observed"},
		{"vipproxy_health_checks_total", []string{"backend", "b0", "result", "failure"}, zero, "0 before any failure"},
		{"vipproxy_accept_errors_total", []string{"reason", "emfile"}, zero, "0 before any error"},
		{"vipproxy_vip_held", []string{"address", "127.0.0.1"}, one, "1: 127.0.0.1 is on lo, not on the dummy link"},
		{"vipproxy_panic_mode", nil, zero, "0"},
	}
	for _, w := range wants {
		if w.name == netlinkSeries && testutil.Emulated() {
			continue
		}
		if v, ok := seriesValue(fams, w.name, w.labels...); !ok || !w.check(v) {
			t.Errorf("%s%v = %v (present: %v), want %s", w.name, w.labels, v, ok, w.what)
		}
	}
	if bi := fams["vipproxy_build_info"].GetMetric(); len(bi) == 1 {
		for _, l := range bi[0].Label {
			if l.GetValue() == "" {
				t.Errorf("vipproxy_build_info label %s is empty", l.GetName())
			}
		}
	}

	before, _ := seriesValue(fams, "vipproxy_config_last_reload_success_timestamp_seconds")
	p.rewrite("[vip]\naddresses = [\"127.0.0.1\"]\nport = \"not a number\"\n")
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return p.status().ConfigError != "" }, "reload error reported in /status")
	fams = p.scrape()
	if v, _ := seriesValue(fams, "vipproxy_config_last_reload_successful"); v != 0 {
		t.Errorf("vipproxy_config_last_reload_successful = %v after a failed reload, want 0", v)
	}
	if v, _ := seriesValue(fams, "vipproxy_config_last_reload_success_timestamp_seconds"); v != before {
		t.Errorf("a failed reload moved the success timestamp: %v -> %v", before, v)
	}

	a.SetReady(false)
	p.waitState("b0", "down")
	fams = p.scrape()
	if v, _ := seriesValue(fams, "vipproxy_backend_state", "backend", "b0", "state", "down"); v != 1 {
		t.Errorf("vipproxy_backend_state{state=down} = %v with the backend down", v)
	}
	if v, _ := seriesValue(fams, "vipproxy_backend_transitions_total", "backend", "b0"); v < 2 {
		t.Errorf("vipproxy_backend_transitions_total = %v after up and down, want >= 2", v)
	}
}

var metricName = regexp.MustCompile(`\b(?:vipproxy|process|go)_[a-z0-9_]+\b`)

// monitoringExprs returns the PromQL of monitoring/: the alert rules
// file as a whole and each dashboard query.
func monitoringExprs(t *testing.T) (rules string, dashboard []string) {
	t.Helper()
	b, err := os.ReadFile("../../monitoring/vipproxy-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules = string(b)
	b, err = os.ReadFile("../../monitoring/vipproxy-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("monitoring/vipproxy-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			dashboard = append(dashboard, tg.Expr)
		}
	}
	return rules, dashboard
}

// Every metric the alert rules and the dashboard use is one a running
// daemon exports (a renamed metric would leave an alert that never fires),
// and the dashboard's queries are valid PromQL (promtool, when installed,
// checks them as rules with the Grafana variables filled in).
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	rules, dashboard := monitoringExprs(t)
	a := backend(t, "a")
	p := startVIPProxy(t, newSettings(t, a.Addr()), nil)
	p.waitState("b0", "up")
	fams := p.scrape()
	used := map[string]string{}
	for _, n := range metricName.FindAllString(rules, -1) {
		used[n] = "monitoring/vipproxy-alerts.yml"
	}
	for _, e := range dashboard {
		for _, n := range metricName.FindAllString(e, -1) {
			used[n] = "monitoring/vipproxy-dashboard.json"
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d metric names found in monitoring/: %v", len(used), used)
	}
	for n, where := range used {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && fams[b].GetType() == dto.MetricType_HISTOGRAM {
				base = b
			}
		}
		if fams[base] == nil && !(base == netlinkSeries && testutil.Emulated()) && base != bgpSeries {
			t.Errorf("%s uses %s, which the daemon does not export", where, n)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: dashboard PromQL not checked")
		return
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	fill := strings.NewReplacer("$instance", ".*", "$backend", ".*", "$__rate_interval", "5m")
	for i, e := range dashboard {
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %q\n", i, fill.Replace(e))
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("dashboard queries are not valid PromQL: %v\n%s", err, out)
	}
}
