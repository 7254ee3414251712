package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// it is 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procSample is the resource use of a process tree at one moment.
type procSample struct {
	CPU   time.Duration // user + system time since start
	Sys   time.Duration // the system part of CPU: in the kernel for the process
	RSSKB int64         // VmRSS summed over the tree
	FDs   int           // open descriptors summed over the tree
	// Switches counts the context switches of every thread of the tree,
	// voluntary or not: a thread woken for little work costs two.
	Switches int64
}

// sampleTree reads the root process and all its descendants (nginx runs a
// master and a worker; both count).
func sampleTree(root int) (procSample, error) {
	pids, err := treePIDs(root)
	if err != nil {
		return procSample{}, err
	}
	var s procSample
	for _, pid := range pids {
		cpu, sys, err := procCPU(pid)
		if err != nil {
			return procSample{}, err
		}
		rss, err := procRSSKB(pid)
		if err != nil {
			return procSample{}, err
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return procSample{}, fmt.Errorf("count descriptors of %d: %w", pid, err)
		}
		switches, err := procSwitches(pid)
		if err != nil {
			return procSample{}, err
		}
		s.CPU += cpu
		s.Sys += sys
		s.Switches += switches
		s.RSSKB += rss
		s.FDs += len(fds)
	}
	return s, nil
}

// treePIDs returns root and every process whose parent chain leads to it.
func treePIDs(root int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, err := statFields(pid)
		if err != nil {
			continue // exited meanwhile
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out) && i < 1000; i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (which may contain spaces): fields[0] is the state, fields[1] the ppid.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// procCPU is the CPU time of every thread of pid, ended ones included,
// and its system part. The total comes from the process's CPU-time clock
// (the scheduler's runtime, in nanoseconds): utime+stime count in clock
// ticks of 10 ms, a thirty-sixth of the backend-SIGKILL storm's 0.36 s, where
// one tick more read as 3 % more than HAProxy (2026-12-05). The system
// part, a row of its own, stays in ticks.
func procCPU(pid int) (cpu, sys time.Duration, err error) {
	cpu, sys, err = statCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(processCPUClock(pid), &ts); err == nil {
		cpu = time.Duration(ts.Nano())
	}
	return cpu, sys, nil
}

// statCPU is utime+stime of every thread of pid, and stime alone, in
// /proc/<pid>/stat's clock ticks.
func statCPU(pid int) (cpu, sys time.Duration, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	// fields[11] is utime and fields[12] stime (stat fields 14 and 15).
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("parse cpu of %d: %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, time.Duration(st) * clockTick, nil
}

// processCPUClock is the clock id of pid's CPU time, all its threads
// together: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's
// include/linux/posix-timers.h, what clock_getcpuclockid(3) returns.
func processCPUClock(pid int) int32 {
	const cpuClockSched = 2
	return int32(^pid<<3 | cpuClockSched)
}

func procRSSKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS of %d: %q", pid, rest)
			}
			return kb, nil
		}
	}
	return 0, nil // kernel threads and zombies have no VmRSS
}

// procSwitches sums the context switches of a process's threads
// (/proc/<pid>/status gives only the main thread's).
func procSwitches(pid int) (int64, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("list the threads of %d: %w", pid, err)
	}
	var n int64
	for _, task := range tasks {
		v, err := procSwitchesOf(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread ended meanwhile
			}
			return 0, err
		}
		n += v
	}
	return n, nil
}

// procSwitchesOf reads one status file's context switches, voluntary or
// not.
func procSwitchesOf(status string) (int64, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		for _, key := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("parse %s in %s: %q", key, status, rest)
				}
				n += v
			}
		}
	}
	return n, nil
}
