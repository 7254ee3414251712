package bench

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// results collects every measured value: figure -> contender -> one value per repetition.
type results struct {
	vals  map[string]map[string][]float64
	texts map[string]map[string]string // rows that are words, not numbers
	notes []string
}

func newResults() *results {
	return &results{vals: map[string]map[string][]float64{}, texts: map[string]map[string]string{}}
}

// text sets a row's cell that is not a number (e.g. "1667/1667/1666").
func (r *results) text(fig, contender, s string) {
	if r.texts[fig] == nil {
		r.texts[fig] = map[string]string{}
	}
	r.texts[fig][contender] = s
}

func (r *results) add(fig, contender string, v float64) {
	if r.vals[fig] == nil {
		r.vals[fig] = map[string][]float64{}
	}
	r.vals[fig][contender] = append(r.vals[fig][contender], v)
}

func (r *results) note(s string) { r.notes = append(r.notes, s) }

// value is the median over repetitions, or the total for counts of failures.
func (r *results) value(f figureSpec, contender string) (float64, bool) {
	vs := r.vals[f.key][contender]
	if len(vs) == 0 {
		return 0, false
	}
	if f.sum {
		var t float64
		for _, v := range vs {
			t += v
		}
		return t, true
	}
	return median(vs), true
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figureSpec is one row of the table.
type figureSpec struct {
	key, label string
	sum        bool // total over repetitions instead of the median
	// count: the figure counts things (connections, attempts, events), so
	// a whole value prints without decimals; a measured 1.00 s stays 1.00.
	count bool
	goal  *goal
}

// goal is what vipproxy must reach: a ratio to HAProxy or an absolute limit.
type goal struct {
	text  string
	ratio bool // compare vipproxy/haproxy, else vipproxy's own value
	// vsHAProxy: pass if vipproxy's value is at most HAProxy's (counts
	// where both may be 0, so a ratio says nothing).
	vsHAProxy bool
	atLeast   bool    // pass if >= limit, else pass if <= limit
	limit     float64 //
}

func (g goal) check(v float64) bool {
	v = math.Round(v*100) / 100 // judge the value as shown: 2.0004 descriptors is 2.00
	if g.atLeast {
		return v >= g.limit
	}
	return v <= g.limit
}

func ratioAtLeast(x float64) *goal {
	return &goal{text: fmt.Sprintf("≥ %.2g× HAProxy", x), ratio: true, atLeast: true, limit: x}
}
func ratioAtMost(x float64) *goal {
	return &goal{text: fmt.Sprintf("≤ %.2g× HAProxy", x), ratio: true, limit: x}
}
func atMost(x float64, unit string) *goal {
	return &goal{text: fmt.Sprintf("≤ %g %s", x, unit), limit: x}
}

func figureSpecs(opt options) []figureSpec {
	var fs []figureSpec
	for _, s := range []int{1, 8} {
		for _, d := range []string{"up", "down"} {
			var g *goal
			if s == 8 {
				g = ratioAtLeast(1.5)
			}
			fs = append(fs, figureSpec{key: fmt.Sprintf("bulk-%d-%s", s, d),
				label: fmt.Sprintf("bulk %d stream(s) %s, MB/s", s, d), goal: g})
		}
	}
	for _, s := range []int{1, 8} {
		for _, d := range []string{"up", "down"} {
			fs = append(fs, figureSpec{key: fmt.Sprintf("cpugb-%d-%s", s, d),
				label: fmt.Sprintf("proxy CPU s per GB, %d stream(s) %s", s, d), goal: ratioAtMost(0.35)})
		}
	}
	for _, w := range []int{1, 32} {
		var g, gc *goal
		if w == 32 {
			g, gc = ratioAtLeast(1.2), ratioAtMost(0.8)
		}
		fs = append(fs,
			figureSpec{key: fmt.Sprintf("cps-%d", w), label: fmt.Sprintf("new connections/s, %d worker(s)", w), goal: g},
			figureSpec{key: fmt.Sprintf("c2fb50-%d", w), label: fmt.Sprintf("connect to first byte p50 µs, %d worker(s)", w)},
			figureSpec{key: fmt.Sprintf("c2fb99-%d", w), label: fmt.Sprintf("connect to first byte p99 µs, %d worker(s)", w)},
			figureSpec{key: fmt.Sprintf("cpuconn-%d", w), label: fmt.Sprintf("proxy CPU µs per connection, %d worker(s)", w), goal: gc},
			// The kernel's share: the TCP work of accept, connect, send and
			// close, which any user-space proxy pays, bounds the ratio above.
			figureSpec{key: fmt.Sprintf("sysconn-%d", w), label: fmt.Sprintf("of which system (kernel) µs per connection, %d worker(s)", w)},
			// Each one costs both the thread that leaves and the one that
			// comes. Go's sysmon thread, woken by every system call made
			// through the scheduler, was half of them (measured on
			// 2026-12-03).
			figureSpec{key: fmt.Sprintf("ctxconn-%d", w), label: fmt.Sprintf("proxy context switches per connection, %d worker(s)", w)})
	}
	fs = append(fs, figureSpec{key: "syscalls", label: "system calls per connection (strace -c -f, 1 worker)"})
	for _, c := range []int{1, 64} {
		var g *goal
		if c == 1 {
			g = ratioAtMost(0.9)
		}
		fs = append(fs,
			figureSpec{key: fmt.Sprintf("pp50-%d", c), label: fmt.Sprintf("ping-pong 64 B p50 µs, %d conn(s)", c), goal: g},
			figureSpec{key: fmt.Sprintf("pp99-%d", c), label: fmt.Sprintf("ping-pong 64 B p99 µs, %d conn(s)", c)},
			figureSpec{key: fmt.Sprintf("pp999-%d", c), label: fmt.Sprintf("ping-pong 64 B p99.9 µs, %d conn(s)", c)},
			figureSpec{key: fmt.Sprintf("rtps-%d", c), label: fmt.Sprintf("ping-pong round trips/s, %d conn(s)", c)},
			figureSpec{key: fmt.Sprintf("cpurt-%d", c), label: fmt.Sprintf("proxy CPU µs per round trip, %d conn(s)", c)})
	}
	fs = append(fs,
		figureSpec{key: "idle-est", count: true, label: fmt.Sprintf("idle connections held (of %d)", opt.IdleConns),
			goal: &goal{text: fmt.Sprintf("all %d", opt.IdleConns), atLeast: true, limit: float64(opt.IdleConns)}},
		figureSpec{key: "idle-rss", label: "idle: proxy RSS KB per connection", goal: atMost(6, "KB")},
		figureSpec{key: "idle-fds", label: "idle: proxy descriptors per connection", goal: atMost(2, "")},
		figureSpec{key: "fail", count: true, label: fmt.Sprintf("failover: failed new connections (%d/s, backend SIGKILLed; total of all reps)", opt.FailoverRate),
			sum: true, goal: &goal{text: "0", limit: 0}},
		figureSpec{key: "fail-inflight", count: true, label: "failover: connections lost in flight (the killed backend had received them)", sum: true},
		figureSpec{key: "fail-tried", count: true, label: "failover: new connections tried (total)", sum: true},
		figureSpec{key: "ready", label: "start to READY=1, ms", goal: atMost(100, "ms")},
	)
	fs = append(fs, stormSpecs(opt)...)
	for _, a := range []string{"amd64", "arm64", "riscv64"} {
		fs = append(fs, figureSpec{key: "size-" + a, label: "stripped static binary MB, linux/" + a, goal: atMost(12, "MB")})
	}
	return fs
}

// render writes the one table: every figure, every contender, each
// contender's ratio to HAProxy, vipproxy's goal and whether it is met.
func (r *results) render(contenders []string, opt options) string {
	var b strings.Builder
	var others []string
	for _, c := range contenders {
		if c != "haproxy" {
			others = append(others, c)
		}
	}
	hdr := append([]string{"figure"}, contenders...)
	for _, c := range others {
		hdr = append(hdr, c+" ÷ haproxy")
	}
	hdr = append(hdr, "goal (vipproxy)", "result")
	row(&b, hdr)
	row(&b, slices.Repeat([]string{"---"}, len(hdr)))
	intervals := false
	for _, f := range figureSpecs(opt) {
		if r.vals[f.key] == nil && r.texts[f.key] == nil {
			continue
		}
		cells := []string{f.label}
		for _, c := range contenders {
			cells = append(cells, r.cell(f, c))
		}
		for _, c := range others {
			if q, ok := r.ratio(f, c); ok {
				cell, withInterval := r.ratioCell(f, c, q)
				cells = append(cells, cell)
				intervals = intervals || withInterval
			} else {
				cells = append(cells, "")
			}
		}
		cells = append(cells, r.verdict(f)...)
		row(&b, cells)
	}
	notes := r.notes
	if intervals {
		notes = append(slices.Clone(notes), intervalNote)
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\nnote: %s\n", n)
	}
	return b.String()
}

// ratioCell prints a ratio, and with enough repetitions its interval:
// "0.97 (0.91–1.04)"; withInterval says which.
func (r *results) ratioCell(f figureSpec, c string, q float64) (cell string, withInterval bool) {
	if lo, hi, ok := r.ratioInterval(f, c); ok {
		return fmt.Sprintf("%.2f (%.2f–%.2f)", q, lo, hi), true
	}
	return fmt.Sprintf("%.2f", q), false
}

func (r *results) cell(f figureSpec, c string) string {
	if t, ok := r.texts[f.key][c]; ok {
		return t
	}
	v, ok := r.value(f, c)
	if !ok {
		return "–"
	}
	return format(v, f.count)
}

// ratio is c's figure divided by HAProxy's. With one value per
// repetition on both sides it is the median of the per-repetition ratios:
// neighbours in the interleaving share the machine's mood, so pairing them
// cancels much of a shared machine's drift.
func (r *results) ratio(f figureSpec, c string) (float64, bool) {
	if qs := r.pairedRatios(f, c); qs != nil {
		return median(qs), true
	}
	v, ok1 := r.value(f, c)
	h, ok2 := r.value(f, "haproxy")
	if !ok1 || !ok2 || h == 0 {
		return 0, false
	}
	return v / h, true
}

// pairedRatios are c's per-repetition ratios to HAProxy's, nil unless
// every repetition has both values.
func (r *results) pairedRatios(f figureSpec, c string) []float64 {
	cv, hv := r.vals[f.key][c], r.vals[f.key]["haproxy"]
	if f.sum || len(cv) == 0 || len(cv) != len(hv) {
		return nil
	}
	qs := make([]float64, 0, len(cv))
	for i := range cv {
		if hv[i] == 0 {
			return nil
		}
		qs = append(qs, cv[i]/hv[i])
	}
	return qs
}

// medianInterval is a distribution-free confidence interval for the
// median of vs: the k-th smallest and k-th largest value, with the
// largest k whose coverage, 1 - 2·P(Binomial(n, ½) < k), is at least
// 95 % (with fewer than 6 values none is: the lowest and highest, and
// their coverage). It asks nothing of the shape of the spread, which on
// a shared machine has long tails (a slow spell of the host).
func medianInterval(vs []float64) (lo, hi, coverage float64) {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	k, cov := 1, 1-2*binomialBelow(n, 1)
	for k+1 <= n/2 {
		c := 1 - 2*binomialBelow(n, k+1)
		if c < 0.95 {
			break
		}
		k, cov = k+1, c
	}
	return s[k-1], s[n-k], cov
}

// binomialBelow is P(X < k) for X ~ Binomial(n, ½).
func binomialBelow(n, k int) float64 {
	var p, term float64 = 0, math.Pow(0.5, float64(n)) // P(X = 0)
	for i := 0; i < k; i++ {
		p += term
		term *= float64(n-i) / float64(i+1)
	}
	return p
}

// intervalNote says what a ratio's parentheses and "within noise" mean.
const intervalNote = "a ratio is the median of the per-repetition ratios; in parentheses, from " +
	"5 repetitions on, the interval that holds the true median at least 94 % of the time (95 % from 6; " +
	"order statistics, no assumption on the spread). \"within noise\": the goal lies inside it, so " +
	"this run cannot tell on which side vipproxy is; more repetitions narrow it."

// minIntervalReps is the fewest repetitions for which a ratio gets its
// interval: with 5 the lowest and highest ratio cover the median 94 %
// of the time; with fewer the interval is too wide to say anything.
const minIntervalReps = 5

// ratioInterval is medianInterval over c's per-repetition ratios.
func (r *results) ratioInterval(f figureSpec, c string) (lo, hi float64, ok bool) {
	qs := r.pairedRatios(f, c)
	if len(qs) < minIntervalReps {
		return 0, 0, false
	}
	lo, hi, _ = medianInterval(qs)
	return lo, hi, true
}

func (r *results) verdict(f figureSpec) []string {
	if f.goal == nil {
		return []string{"", ""}
	}
	var v float64
	var ok bool
	if f.goal.vsHAProxy {
		v, ok = r.value(f, "vipproxy")
		h, hok := r.value(f, "haproxy")
		if !ok || !hok {
			return []string{f.goal.text, "n/a"}
		}
		if v <= h {
			return []string{f.goal.text, "pass"}
		}
		return []string{f.goal.text, "**MISS**"}
	}
	if f.goal.ratio {
		v, ok = r.ratio(f, "vipproxy")
	} else {
		v, ok = r.value(f, "vipproxy")
	}
	if !ok {
		return []string{f.goal.text, "n/a"}
	}
	result := "**MISS**"
	if f.goal.check(v) {
		result = "pass"
	}
	if f.goal.ratio && r.goalInsideInterval(f) {
		result += ", within noise"
	}
	return []string{f.goal.text, result}
}

// goalInsideInterval: the goal's limit lies inside vipproxy's ratio
// interval, so this run cannot tell on which side of it vipproxy is: a
// pass or a miss that another run may turn round.
func (r *results) goalInsideInterval(f figureSpec) bool {
	lo, hi, ok := r.ratioInterval(f, "vipproxy")
	if !ok {
		return false
	}
	return f.goal.check(lo) != f.goal.check(hi)
}

func row(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// format prints a cell: a count that is whole without decimals, anything
// else with three significant digits or more.
func format(v float64, count bool) string {
	a := math.Abs(v)
	switch {
	case count && v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// machineLine names the CPU, the core count, the kernel and the contenders'
// versions, so a reader can judge the numbers.
func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s, nproc %d, Linux %s, %s, %s, %s, %s", model, runtime.NumCPU(),
		strings.TrimSpace(string(kernel)), version("haproxy", "-v"), version("nginx", "-v"), runtime.Version(),
		time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func version(bin, flag string) string {
	out, err := exec.Command(bin, flag).CombinedOutput()
	if err != nil {
		return bin + " ?"
	}
	line := firstLine(strings.TrimSpace(string(out)))
	if f := strings.Fields(line); len(f) >= 3 && bin == "haproxy" {
		return "HAProxy " + f[2]
	}
	return strings.TrimPrefix(line, "nginx version: ")
}

// spread is, per figure and contender, (max-min)/median over the
// repetitions: how far to trust a ratio on a shared machine.
func (r *results) spread(contenders []string, opt options) string {
	var b strings.Builder
	for _, f := range figureSpecs(opt) {
		if r.vals[f.key] == nil || f.sum {
			continue
		}
		var parts []string
		for _, c := range contenders {
			vs := r.vals[f.key][c]
			if len(vs) < 2 {
				continue
			}
			m := median(vs)
			if m == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s ±%.0f%%", c, 50*(slices.Max(vs)-slices.Min(vs))/m))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "spread %-45s %s\n", f.label+":", strings.Join(parts, ", "))
		}
	}
	return b.String()
}
