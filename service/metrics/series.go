package metrics

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Counter only goes up. Every vipproxy counter counts whole things
// (connections, bytes, checks), so it is an integer: one atomic add.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value is the count so far.
func (c *Counter) Value() uint64 { return c.v.Load() }

func (c *Counter) write(w *textWriter, name, labels string) {
	w.sample(name, labels, "", formatUint(c.Value()))
}

// Gauge goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (negative to subtract).
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Inc adds one.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.Add(-1) }

// Value is the gauge's current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func (g *Gauge) write(w *textWriter, name, labels string) {
	w.sample(name, labels, "", formatFloat(g.Value()))
}

// Histogram counts observations into fixed buckets (upper bounds,
// inclusive, as Prometheus' `le`).
type Histogram struct {
	upper  []float64       // sorted; +Inf is implied
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(upper []float64) *Histogram {
	return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.upper, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

func (h *Histogram) write(w *textWriter, name, labels string) {
	// _count is the sum of the buckets read here, so it always equals the
	// +Inf bucket even while observations arrive.
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		le := "+Inf"
		if i < len(h.upper) {
			le = formatFloat(h.upper[i])
		}
		w.sample(name+"_bucket", labels, `le="`+le+`"`, formatUint(cum))
	}
	w.sample(name+"_sum", labels, "", formatFloat(math.Float64frombits(h.sum.Load())))
	w.sample(name+"_count", labels, "", formatUint(cum))
}

// ExponentialBuckets returns n upper bounds: start, start*factor, ...
func ExponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// series is anything that writes its samples in the text format.
type series interface {
	write(w *textWriter, name, labels string)
}

// family is one metric name: its help, type, label names and series.
type family struct {
	name, help, kind string
	labels           []string

	mu     sync.Mutex
	series map[string]entry // by label values joined with 0xff
	// collect, if set, gives the family's gauges at scrape time instead.
	collect func(emit func(v float64, values ...string))
}

type entry struct {
	values []string
	s      series
}

func newFamily(name, kind, help string, labels ...string) *family {
	return &family{name: name, help: help, kind: kind, labels: labels, series: map[string]entry{}}
}

// get returns the series of the label values, made by mk if new.
func (f *family) get(mk func() series, values ...string) series {
	if len(values) != len(f.labels) {
		panic("metrics: " + f.name + " takes labels " + strings.Join(f.labels, ","))
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.series[key]; ok {
		return e.s
	}
	s := mk()
	f.series[key] = entry{values: slices.Clone(values), s: s}
	return s
}

// deleteMatching drops every series whose labels have the given values
// (label, value, label, value ...); a family without one of the labels
// keeps its series.
func (f *family) deleteMatching(pairs ...string) {
	var idx []int
	for i := 0; i+1 < len(pairs); i += 2 {
		j := slices.Index(f.labels, pairs[i])
		if j < 0 {
			return
		}
		idx = append(idx, j)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, e := range f.series {
		match := true
		for n, j := range idx {
			match = match && e.values[j] == pairs[2*n+1]
		}
		if match {
			delete(f.series, k)
		}
	}
}

// Vec is a family of series of one type told apart by label values.
type Vec[T series] struct {
	f  *family
	mk func() T
}

// WithLabelValues returns the series of the values (in the order of the
// label names), creating it at 0.
func (v Vec[T]) WithLabelValues(values ...string) T {
	return v.f.get(func() series { return v.mk() }, values...).(T)
}

// CounterVec is counters by label.
type CounterVec = Vec[*Counter]

// GaugeVec is gauges by label.
type GaugeVec = Vec[*Gauge]

// HistogramVec is histograms by label.
type HistogramVec = Vec[*Histogram]
