package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A whole count prints without decimals, a measured figure with them even
// when it is whole: a storm's proxy CPU of exactly 1.00 s printed "1", as
// if it had counted something (the table of 2026-12-05).
func TestTableCellsTellCountsFromMeasures(t *testing.T) {
	opt := options{StormClients: 100}
	r := newResults()
	for _, c := range []string{"vipproxy", "haproxy"} {
		r.add("st-at-once-cpu", c, 1)
		r.add("st-at-once-failed", c, 3)
	}
	tableHas(t, r.render([]string{"vipproxy", "haproxy"}, opt),
		"| storm: all watches connect at once: proxy CPU s in the first ",
		" | 1.00 | 1.00 | 1.00 |",
		"| storm: all watches connect at once: failed connection attempts | 3 | 3 | 1.00 |")
}

// tableHas fails the test for each of wants that table lacks.
func tableHas(t *testing.T, table string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// The interval is the k-th smallest and largest ratio with the largest k
// that still covers the median 95 % of the time (binomial tables: k = 3
// of 12 covers 96.1 %, k = 4 of 15 96.5 %, k = 6 of 20 95.9 %).
func TestMedianIntervalTakesTheOrderStatisticsOfTheTables(t *testing.T) {
	for _, tc := range []struct {
		n, k     int
		coverage float64
	}{{5, 1, 0.9375}, {6, 1, 0.9688}, {12, 3, 0.9614}, {15, 4, 0.9648}, {20, 6, 0.9586}} {
		vs := make([]float64, tc.n)
		for i := range vs {
			vs[len(vs)-1-i] = float64(i + 1) // descending: the function must sort
		}
		lo, hi, cov := medianInterval(vs)
		if lo != float64(tc.k) || hi != float64(tc.n-tc.k+1) || math.Abs(cov-tc.coverage) > 0.0001 {
			t.Errorf("n=%d: interval %.0f–%.0f covering %.4f, want %d–%d covering %.4f", tc.n, lo, hi, cov, tc.k, tc.n-tc.k+1, tc.coverage)
		}
	}
}

// A ratio from five or more repetitions shows its interval, and a goal
// inside it is a result this run cannot tell: the storms' CPU read 0.97×
// HAProxy's in one run and 1.08× in the next (2026-12-05), both printed as
// a plain pass or MISS.
func TestRatioGoalInsideItsIntervalIsWithinNoise(t *testing.T) {
	opt := options{StormClients: 100}
	r := newResults()
	// Ratios 0.90, 0.95, 0.97, 1.02, 1.05: median 0.97, interval 0.90–1.05
	// holds the goal (≤ 1): a pass within noise. Ratios 0.80–0.88 pass clearly.
	haproxy := []float64{1, 1, 1, 1, 1}
	for i, v := range []float64{1.05, 0.90, 1.02, 0.95, 0.97} {
		r.add("st-at-once-cpu", "vipproxy", v)
		r.add("st-at-once-cpu", "haproxy", haproxy[i])
		r.add("st-kill-backend-cpu", "vipproxy", 0.80+0.02*float64(i))
		r.add("st-kill-backend-cpu", "haproxy", haproxy[i])
	}
	tableHas(t, r.render([]string{"vipproxy", "haproxy"}, opt),
		" | 0.97 (0.90–1.05) | ≤ 1× HAProxy | pass, within noise |",
		" | 0.84 (0.80–0.88) | ≤ 1× HAProxy | pass |",
		"note: a ratio is the median of the per-repetition ratios")
}

// The table's last line names the repetitions the figures had: a run of
// the storms alone, 15 repetitions, said "medians of 5" (--reps, unused).
func TestRepsTextNamesTheRepetitionsUsed(t *testing.T) {
	for _, tc := range []struct {
		figures []string
		want    string
	}{
		{[]string{"storm"}, "storms: medians of 15 interleaved repetitions"},
		{[]string{"connrate"}, "medians of 5 interleaved repetitions (idle, failover: 3), 2s per run"},
		{[]string{"connrate", "storm"}, "medians of 5 interleaved repetitions (idle, failover: 3), 2s per run; storms: medians of 15 interleaved repetitions"},
	} {
		opt := options{Figures: tc.figures, Reps: 5, StormReps: 15, Duration: 2 * time.Second}
		if got := repsText(opt); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.figures, got, tc.want)
		}
	}
}
