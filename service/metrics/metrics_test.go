package metrics

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// scrape renders the metrics as Prometheus text and parses it back, as
// a Prometheus server would.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	// prometheus/common's parser is Prometheus' own: stricter than
	// anything written here, and only a test dependency.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(bytes.NewReader(m.Expose()))
	if err != nil {
		t.Fatalf("parse the text exposition: %v", err)
	}
	return parsed
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue(), true
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsExposition(t *testing.T) {
	m := New()
	a := m.Backend("api", "api-a")
	a.ConnectionsTotal.Add(3)
	a.ConnectionsOpen.Set(2)
	a.DialErrors.Inc()
	a.BytesToBackend.Add(100)
	a.BytesToClient.Add(250)
	a.Up.Set(1)
	m.Backend("api", "api-b") // a known backend shows at 0 before any traffic
	m.DialRetries.WithLabelValues("api").Inc()
	m.AddPort("api")
	m.Rejected.WithLabelValues("api", RejectLimit).Inc()
	m.AcceptErrors.WithLabelValues("emfile").Add(4)
	m.Reloads.WithLabelValues(ResultError).Inc()
	m.ReloadSuccessful.Set(0)
	m.ObserveCheck("api", "api-a", true, 3*time.Millisecond)
	m.ObserveCheck("api", "api-a", false, time.Second)
	m.ObserveCheck("api", "api-a", true, time.Millisecond)

	fams := scrape(t, m)
	for _, tc := range []struct {
		name   string
		typ    dto.MetricType
		labels map[string]string
		want   float64
	}{
		{"vipproxy_connections_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a"}, 3},
		{"vipproxy_connections_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-b"}, 0},
		{"vipproxy_connections_open", dto.MetricType_GAUGE, map[string]string{"backend": "api-a"}, 2},
		{"vipproxy_dial_errors_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a"}, 1},
		{"vipproxy_dial_retries_total", dto.MetricType_COUNTER, map[string]string{"port": "api"}, 1},
		{"vipproxy_connections_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a", "port": "api"}, 3},
		{"vipproxy_connections_rejected_total", dto.MetricType_COUNTER, map[string]string{"reason": "limit"}, 1},
		{"vipproxy_connections_rejected_total", dto.MetricType_COUNTER, map[string]string{"reason": "no_backend"}, 0},
		{"vipproxy_bytes_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a", "direction": "to_backend"}, 100},
		{"vipproxy_bytes_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a", "direction": "to_client"}, 250},
		{"vipproxy_backend_up", dto.MetricType_GAUGE, map[string]string{"backend": "api-a"}, 1},
		{"vipproxy_backend_up", dto.MetricType_GAUGE, map[string]string{"backend": "api-b"}, 0},
		{"vipproxy_health_checks_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a", "result": "success"}, 2},
		{"vipproxy_health_checks_total", dto.MetricType_COUNTER, map[string]string{"backend": "api-a", "result": "failure"}, 1},
		{"vipproxy_health_check_duration_seconds", dto.MetricType_HISTOGRAM, map[string]string{"backend": "api-a"}, 3},
		{"vipproxy_accept_errors_total", dto.MetricType_COUNTER, map[string]string{"reason": "emfile"}, 4},
		{"vipproxy_reloads_total", dto.MetricType_COUNTER, map[string]string{"result": "error"}, 1},
		{"vipproxy_reloads_total", dto.MetricType_COUNTER, map[string]string{"result": "ok"}, 0},
		{"vipproxy_config_last_reload_successful", dto.MetricType_GAUGE, nil, 0},
	} {
		f, ok := fams[tc.name]
		if !ok {
			t.Errorf("%s missing from the exposition", tc.name)
			continue
		}
		if f.GetType() != tc.typ {
			t.Errorf("%s is a %v, want %v", tc.name, f.GetType(), tc.typ)
		}
		got, ok := value(t, fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("runtime/process metric %s missing", name)
		}
	}
	// One gauge says whether the last reload succeeded: the name
	// Prometheus' own exporters use, not a second copy beside it.
	if _, ok := fams["vipproxy_config_last_reload_success"]; ok {
		t.Error("vipproxy_config_last_reload_success is exported beside vipproxy_config_last_reload_successful")
	}
}

func TestForgetRemovesOnlyThatBackend(t *testing.T) {
	m := New()
	for _, name := range []string{"gone", "kept"} {
		b := m.Backend("api", name)
		b.ConnectionsTotal.Inc()
		b.BytesToClient.Inc()
		m.ObserveCheck("api", name, true, time.Millisecond)
	}
	m.Forget("api", "gone")
	fams := scrape(t, m)
	for name, f := range fams {
		for _, metric := range f.Metric {
			for _, l := range metric.Label {
				if l.GetName() == "backend" && l.GetValue() == "gone" {
					t.Errorf("%s still has a series for the forgotten backend", name)
				}
			}
		}
	}
	if v, ok := value(t, fams, "vipproxy_connections_total", map[string]string{"backend": "kept"}); !ok || v != 1 {
		t.Errorf("kept backend lost its series: %v %v", v, ok)
	}
}

// TestPortsAreSeparateSeries: the same node behind two ports is two
// backends, each with its series; forgetting one (its port removed, or
// the node gone from one pool) keeps the other.
func TestPortsAreSeparateSeries(t *testing.T) {
	m := New()
	m.AddPort("api")
	m.AddPort("konnectivity")
	m.Backend("api", "cp1").ConnectionsTotal.Add(2)
	m.Backend("konnectivity", "cp1").ConnectionsTotal.Add(5)
	m.PanicMode.WithLabelValues("konnectivity").Set(1)
	fams := scrape(t, m)
	for port, want := range map[string]float64{"api": 2, "konnectivity": 5} {
		if v, ok := value(t, fams, "vipproxy_connections_total", map[string]string{"backend": "cp1", "port": port}); !ok || v != want {
			t.Errorf("port %s: %v %v, want %v", port, v, ok, want)
		}
	}
	if v, _ := value(t, fams, "vipproxy_panic_mode", map[string]string{"port": "api"}); v != 0 {
		t.Errorf("api's panic mode shows konnectivity's")
	}
	m.Forget("konnectivity", "cp1")
	m.ForgetPort("konnectivity")
	fams = scrape(t, m)
	if _, ok := value(t, fams, "vipproxy_connections_total", map[string]string{"port": "konnectivity"}); ok {
		t.Errorf("a forgotten port's backend series stayed")
	}
	if _, ok := value(t, fams, "vipproxy_connections_rejected_total", map[string]string{"port": "konnectivity"}); ok {
		t.Errorf("a forgotten port's series stayed")
	}
	if v, ok := value(t, fams, "vipproxy_connections_total", map[string]string{"backend": "cp1", "port": "api"}); !ok || v != 2 {
		t.Errorf("the other port's series went: %v %v", v, ok)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := New(), New() // would panic on duplicate registration if global
	a.DialRetries.WithLabelValues("api").Inc()
	if v, _ := value(t, scrape(t, b), "vipproxy_dial_retries_total", nil); v != 0 {
		t.Fatalf("second registry sees the first one's counter: %v", v)
	}
}

func TestHistogramBucketsAreCumulative(t *testing.T) {
	m := New()
	for _, d := range []time.Duration{400 * time.Microsecond, 500 * time.Microsecond, 3 * time.Millisecond, time.Minute} {
		m.ObserveCheck("api", "api-a", true, d)
	}
	h := scrape(t, m)["vipproxy_health_check_duration_seconds"].Metric[0].Histogram
	if h.GetSampleCount() != 4 || h.GetSampleSum() < 60 {
		t.Fatalf("count %d sum %v, want 4 and > 60", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.0005: 2, 0.001: 2, 0.004: 3, 4.096: 3} // le is inclusive
	for _, b := range h.Bucket {
		if n, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != n {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), n)
		}
	}
	if len(h.Bucket) != len(checkBuckets)+1 { // and +Inf
		t.Errorf("%d buckets, want %d", len(h.Bucket), len(checkBuckets)+1)
	}
}

func TestLabelValuesAreEscaped(t *testing.T) {
	m := New()
	odd := "a\"b\\c\nd"
	m.Backend("api", odd).ConnectionsTotal.Inc()
	if v, ok := value(t, scrape(t, m), "vipproxy_connections_total", map[string]string{"backend": odd}); !ok || v != 1 {
		t.Fatalf("backend %q: %v %v", odd, v, ok)
	}
}

// The go_* and process_* series keep client_golang's names and types, and
// read this process, as dashboards for Go services expect.
func TestRuntimeAndProcessSeries(t *testing.T) {
	fams := scrape(t, New())
	for name, typ := range map[string]dto.MetricType{
		"go_goroutines": dto.MetricType_GAUGE, "go_threads": dto.MetricType_GAUGE, "go_info": dto.MetricType_GAUGE,
		"go_gc_duration_seconds": dto.MetricType_SUMMARY, "go_memstats_alloc_bytes_total": dto.MetricType_COUNTER,
		"go_memstats_heap_inuse_bytes": dto.MetricType_GAUGE, "process_cpu_seconds_total": dto.MetricType_COUNTER,
		"process_open_fds": dto.MetricType_GAUGE, "process_max_fds": dto.MetricType_GAUGE,
		"process_resident_memory_bytes": dto.MetricType_GAUGE, "process_virtual_memory_bytes": dto.MetricType_GAUGE,
		"process_start_time_seconds": dto.MetricType_GAUGE,
	} {
		if f, ok := fams[name]; !ok || f.GetType() != typ {
			t.Errorf("%s: missing or not a %v", name, typ)
		}
	}
	// Open a known number of extra descriptors and see them counted.
	before := fams["process_open_fds"].Metric[0].Gauge.GetValue()
	var files []*os.File
	for range 5 {
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	if after := scrape(t, New())["process_open_fds"].Metric[0].Gauge.GetValue(); after != before+float64(len(files)) {
		t.Errorf("process_open_fds %v after opening %d files, was %v", after, len(files), before)
	}
	// qemu-user (make test-multiarch) writes 0 for the resident set in
	// the /proc/self/stat it emulates.
	emulated := testutil.Emulated()
	if rss := fams["process_resident_memory_bytes"].Metric[0].Gauge.GetValue(); rss < 1<<20 && !emulated {
		t.Errorf("resident memory %v bytes: not read from this process", rss)
	}
	start := time.Unix(int64(fams["process_start_time_seconds"].Metric[0].Gauge.GetValue()), 0)
	if since := time.Since(start); since < 0 || since > time.Hour {
		t.Errorf("process started %v ago: not this test process", since)
	}
}

// Scrapes run while the proxy counts and reloads add and forget backends:
// each scrape parses, and nothing is lost (run under -race: make test-race).
func TestScrapeWhileCounting(t *testing.T) {
	m := New()
	b := m.Backend("api", "a")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			b.ConnectionsTotal.Inc()
			b.ConnectionsOpen.Inc()
			b.BytesToClient.Add(10)
			b.DialDuration.Observe(0.001)
			m.ObserveCheck("api", "a", i%2 == 0, time.Millisecond)
			name := fmt.Sprint("tmp", i%3)
			m.Backend("api", name)
			m.Forget("api", name)
		}
	}()
	for range 20 {
		scrape(t, m)
	}
	<-done
	if v, _ := value(t, scrape(t, m), "vipproxy_connections_total", map[string]string{"backend": "a"}); v != 2000 {
		t.Errorf("counted %v connections, want 2000", v)
	}
	if v, _ := value(t, scrape(t, m), "vipproxy_connections_open", map[string]string{"backend": "a"}); v != 2000 {
		t.Errorf("gauge at %v, want 2000", v)
	}
}
