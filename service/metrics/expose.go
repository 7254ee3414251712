package metrics

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the Prometheus text exposition format, version 0.0.4.
// Every Prometheus server and agent accepts it, whatever else its Accept
// header prefers (protobuf, OpenMetrics), so there is nothing to negotiate:
// what the other formats add (native histograms, exemplars) vipproxy does
// not export.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// textWriter builds the exposition in memory, so a slow scraper holds no
// lock.
type textWriter struct{ b []byte }

func (w *textWriter) header(name, kind, help string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = appendEscaped(w.b, help, false)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, kind...)
	w.b = append(w.b, '\n')
}

// sample writes one line; labels and extra are rendered `k="v"` lists.
func (w *textWriter) sample(name, labels, extra, value string) {
	w.b = append(w.b, name...)
	if labels != "" || extra != "" {
		w.b = append(w.b, '{')
		w.b = append(w.b, labels...)
		if labels != "" && extra != "" {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, extra...)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ' ')
	w.b = append(w.b, value...)
	w.b = append(w.b, '\n')
}

// write renders the family, its series sorted by label values.
func (f *family) write(w *textWriter) {
	f.mu.Lock()
	entries := make([]entry, 0, len(f.series))
	for _, e := range f.series {
		entries = append(entries, e)
	}
	collect := f.collect
	f.mu.Unlock()
	if collect != nil {
		collect(func(v float64, values ...string) {
			g := new(Gauge)
			g.Set(v)
			entries = append(entries, entry{values: values, s: g})
		})
	}
	if len(entries) == 0 {
		return // a family with no series is not exposed (as client_golang)
	}
	slices.SortFunc(entries, func(a, b entry) int { return slices.Compare(a.values, b.values) })
	w.header(f.name, f.kind, f.help)
	for _, e := range entries {
		e.s.write(w, f.name, renderLabels(f.labels, e.values))
	}
}

func renderLabels(names, values []string) string {
	var b []byte
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, n...)
		b = append(b, `="`...)
		b = appendEscaped(b, values[i], true)
		b = append(b, '"')
	}
	return string(b)
}

// appendEscaped escapes as the text format wants: backslash and newline
// everywhere, the double quote too inside label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Expose renders every family in the text format.
func (m *Metrics) Expose() []byte {
	w := &textWriter{b: make([]byte, 0, 16<<10)}
	for _, f := range m.families {
		f.write(w)
	}
	writeRuntime(w)
	writeProcess(w)
	return w.b
}

// Handler serves the exposition. At most four scrapes render at once;
// more get 503 (a scrape is cheap, but not free).
func (m *Metrics) Handler() http.Handler {
	inFlight := make(chan struct{}, 4)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			http.Error(w, "too many scrapes at once", http.StatusServiceUnavailable)
			return
		}
		body := m.Expose()
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}
