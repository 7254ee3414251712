package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// perfRecord samples vipproxy's stacks with perf while one figure group
// runs (use an unstripped binary for symbols). It returns the function
// that stops perf and lets it write its file, or nil.
func (r *runner) perfRecord(group string, cs []*contender) func() {
	for _, c := range cs {
		if c.name == "vipproxy" {
			return r.perfRecordTree("vipproxy-"+group, c.pid())
		}
	}
	return nil
}

// perfRecordTree samples the stacks of process root and its children
// (nginx's worker) into <what>.perf.data until the returned function is
// called; nil if --perf-dir is not set or perf cannot start.
func (r *runner) perfRecordTree(what string, root int) func() {
	if r.opt.PerfDir == "" || root == 0 {
		return nil
	}
	pids, err := treePIDs(root)
	if err != nil {
		fmt.Fprintf(r.log, "bench: perf left out: %v\n", err)
		return nil
	}
	list := make([]string, len(pids))
	for i, pid := range pids {
		list[i] = strconv.Itoa(pid)
	}
	out := filepath.Join(r.opt.PerfDir, what+".perf.data")
	cmd := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-p", strings.Join(list, ","), "-o", out)
	if err := r.procs.start(cmd, filepath.Join(r.dir, "perf.log")); err != nil {
		fmt.Fprintf(r.log, "bench: perf left out: %v\n", err)
		return nil
	}
	return func() {
		r.procs.stop(cmd, syscall.SIGINT, 20*time.Second) // perf writes its file on SIGINT
		fmt.Fprintf(r.log, "bench: perf profile during %s: %s\n", what, out)
	}
}

// goRuntime is the part of the Go runtime metrics that explains memory per
// connection.
type goRuntime map[string]float64

var goRuntimeNames = []string{"go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes"}

// scrapeGoRuntime reads vipproxy's /metrics, if it has an admin address
// and exports Go runtime metrics; nil otherwise.
func scrapeGoRuntime(ctx context.Context, admin string) goRuntime {
	if admin == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	m := goRuntime{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, want := range goRuntimeNames {
			if name == want {
				if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					m[name] = v
				}
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// goRuntimeDelta describes the growth per connection of goroutines,
// stacks and heap between before and now.
func goRuntimeDelta(ctx context.Context, admin string, before goRuntime, conns float64) string {
	after := scrapeGoRuntime(ctx, admin)
	if before == nil || after == nil {
		return ""
	}
	return fmt.Sprintf(" (Go: %.2f goroutines, %.2f KB stack, %.2f KB heap in use, %.2f KB from the OS per connection)",
		(after["go_goroutines"]-before["go_goroutines"])/conns,
		(after["go_memstats_stack_inuse_bytes"]-before["go_memstats_stack_inuse_bytes"])/conns/1024,
		(after["go_memstats_heap_inuse_bytes"]-before["go_memstats_heap_inuse_bytes"])/conns/1024,
		(after["go_memstats_sys_bytes"]-before["go_memstats_sys_bytes"])/conns/1024)
}
