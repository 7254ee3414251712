package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallCount is one row of `strace -c`: a system call and how often.
type syscallCount struct {
	name  string
	calls int64
}

// syscalls counts the system calls a proxy makes per proxied connection:
// strace -c -f on every process of its tree during a connection-rate load
// of one worker (each connection: connect, one byte back, close). strace
// slows the proxy down, which changes the rate but not the calls each
// connection costs. Health checks and timers fall in too: a few calls a
// second against thousands of connections.
func (r *runner) syscalls(ctx context.Context, c *contender) error {
	if c.pid() == 0 {
		return nil
	}
	pids, err := treePIDs(c.pid())
	if err != nil {
		return err
	}
	out := filepath.Join(r.dir, c.name+".strace")
	args := []string{"-c", "-f", "-o", out}
	for _, pid := range pids {
		args = append(args, "-p", strconv.Itoa(pid))
	}
	st := exec.Command("strace", args...)
	if err := r.procs.start(st, filepath.Join(r.dir, "strace.log")); err != nil {
		return fmt.Errorf("strace (apt install strace): %w", err)
	}
	time.Sleep(500 * time.Millisecond) // attached to every thread
	res, _, err := r.measured(ctx, c, loadSpec{Kind: "connrate", Conns: 1, Duration: r.opt.Duration, Sources: 8})
	r.procs.stop(st, syscall.SIGINT, 10*time.Second) // strace writes its summary on detaching
	if err != nil {
		return err
	}
	counts, err := readStraceSummary(out)
	if err != nil {
		return err
	}
	if res.Ops == 0 {
		return fmt.Errorf("no connection made under strace")
	}
	var total int64
	var parts []string
	for _, sc := range counts {
		total += sc.calls
		if per := float64(sc.calls) / float64(res.Ops); per >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.2f", sc.name, per))
		}
	}
	per := float64(total) / float64(res.Ops)
	r.res.add("syscalls", c.name, per)
	fmt.Fprintf(r.log, "bench:   syscalls %-9s %.1f per connection (%d connections under strace): %s\n",
		c.name, per, res.Ops, strings.Join(parts, ", "))
	return nil
}

// readStraceSummary parses the table `strace -c` writes, most calls first.
func readStraceSummary(path string) ([]syscallCount, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read strace summary: %w", err)
	}
	var out []syscallCount
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 || f[len(f)-1] == "total" || f[len(f)-1] == "syscall" {
			continue
		}
		calls, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, syscallCount{name: f[len(f)-1], calls: calls})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("strace summary %s: no system calls", path)
	}
	slices.SortFunc(out, func(a, b syscallCount) int { return int(b.calls - a.calls) })
	return out, nil
}
