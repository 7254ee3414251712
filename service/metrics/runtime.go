package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The go_* and process_* series keep client_golang's names and types, so
// the usual dashboards for Go services work unchanged.

// memStat is one go_memstats_* series read from runtime.MemStats.
type memStat struct {
	name, kind, help string
	value            func(*runtime.MemStats) float64
}

var memStats = []memStat{
	{"go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use.", func(m *runtime.MemStats) float64 { return float64(m.Alloc) }},
	{"go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now.", func(m *runtime.MemStats) float64 { return float64(m.TotalAlloc) }},
	{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.", func(m *runtime.MemStats) float64 { return float64(m.Sys) }},
	{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated.", func(m *runtime.MemStats) float64 { return float64(m.Mallocs) }},
	{"go_memstats_frees_total", "counter", "Total number of heap objects frees.", func(m *runtime.MemStats) float64 { return float64(m.Frees) }},
	{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from system.", func(m *runtime.MemStats) float64 { return float64(m.HeapSys) }},
	{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used.", func(m *runtime.MemStats) float64 { return float64(m.HeapIdle) }},
	{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", func(m *runtime.MemStats) float64 { return float64(m.HeapInuse) }},
	{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to OS.", func(m *runtime.MemStats) float64 { return float64(m.HeapReleased) }},
	{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", func(m *runtime.MemStats) float64 { return float64(m.HeapObjects) }},
	{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments.", func(m *runtime.MemStats) float64 { return float64(m.StackInuse) }},
	{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from system for stack allocator.", func(m *runtime.MemStats) float64 { return float64(m.StackSys) }},
	{"go_memstats_mspan_inuse_bytes", "gauge", "Number of bytes in use by mspan structures.", func(m *runtime.MemStats) float64 { return float64(m.MSpanInuse) }},
	{"go_memstats_mspan_sys_bytes", "gauge", "Number of bytes used for mspan structures obtained from system.", func(m *runtime.MemStats) float64 { return float64(m.MSpanSys) }},
	{"go_memstats_mcache_inuse_bytes", "gauge", "Number of bytes in use by mcache structures.", func(m *runtime.MemStats) float64 { return float64(m.MCacheInuse) }},
	{"go_memstats_mcache_sys_bytes", "gauge", "Number of bytes used for mcache structures obtained from system.", func(m *runtime.MemStats) float64 { return float64(m.MCacheSys) }},
	{"go_memstats_buck_hash_sys_bytes", "gauge", "Number of bytes used by the profiling bucket hash table.", func(m *runtime.MemStats) float64 { return float64(m.BuckHashSys) }},
	{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata.", func(m *runtime.MemStats) float64 { return float64(m.GCSys) }},
	{"go_memstats_other_sys_bytes", "gauge", "Number of bytes used for other system allocations.", func(m *runtime.MemStats) float64 { return float64(m.OtherSys) }},
	{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place.", func(m *runtime.MemStats) float64 { return float64(m.NextGC) }},
	{"go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.", func(m *runtime.MemStats) float64 { return float64(m.LastGC) / 1e9 }},
}

// writeRuntime writes the Go runtime's series.
func writeRuntime(w *textWriter) {
	w.header("go_info", "gauge", "Information about the Go environment.")
	w.sample("go_info", `version="`+runtime.Version()+`"`, "", "1")
	w.header("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	w.sample("go_goroutines", "", "", strconv.Itoa(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	w.header("go_threads", "gauge", "Number of OS threads created.")
	w.sample("go_threads", "", "", strconv.Itoa(threads))
	w.header("go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting.")
	w.sample("go_sched_gomaxprocs_threads", "", "", strconv.Itoa(runtime.GOMAXPROCS(0)))

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	w.header("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		w.sample("go_gc_duration_seconds", "", `quantile="`+q+`"`, formatFloat(gc.PauseQuantiles[i].Seconds()))
	}
	w.sample("go_gc_duration_seconds_sum", "", "", formatFloat(gc.PauseTotal.Seconds()))
	w.sample("go_gc_duration_seconds_count", "", "", strconv.FormatInt(gc.NumGC, 10))

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, s := range memStats {
		w.header(s.name, s.kind, s.help)
		w.sample(s.name, "", "", formatFloat(s.value(&ms)))
	}
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture (procfs assumes the same).
const clockTicks = 100

// writeProcess writes the process_* series from /proc/self and
// getrlimit. It reads nothing outside /proc/self: the unit's
// ProcSubset=pid hides /proc/stat, so boot time comes from CLOCK_BOOTTIME.
func writeProcess(w *textWriter) {
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		writeProcStat(w, stat)
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			w.header("process_open_fds", "gauge", "Number of open file descriptors.")
			w.sample("process_open_fds", "", "", strconv.Itoa(len(names)-1)) // minus the one reading
		}
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		w.header("process_max_fds", "gauge", "Maximum number of open file descriptors.")
		w.sample("process_max_fds", "", "", formatUint(lim.Cur))
	}
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) == nil {
		w.header("process_virtual_memory_max_bytes", "gauge", "Maximum amount of virtual memory available in bytes.")
		w.sample("process_virtual_memory_max_bytes", "", "", rlimitValue(lim.Cur))
	}
}

func rlimitValue(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "-1" // as client_golang
	}
	return formatUint(v)
}

// writeProcStat writes the CPU, memory and start time series from the
// contents of /proc/self/stat.
func writeProcStat(w *textWriter, stat []byte) {
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'. Field 3 (state) is fields[0].
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 22 {
		return
	}
	num := func(k int) float64 {
		v, _ := strconv.ParseUint(string(fields[k]), 10, 64)
		return float64(v)
	}
	utime, stime, start, vsize, rss := num(11), num(12), num(19), num(20), num(21)
	w.header("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
	w.sample("process_cpu_seconds_total", "", "", formatFloat((utime+stime)/clockTicks))
	w.header("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
	w.sample("process_virtual_memory_bytes", "", "", formatFloat(vsize))
	w.header("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
	w.sample("process_resident_memory_bytes", "", "", formatFloat(rss*float64(os.Getpagesize())))
	var up unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &up) == nil {
		boot := float64(time.Now().UnixNano()-up.Nano()) / 1e9
		w.header("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
		w.sample("process_start_time_seconds", "", "", formatFloat(boot+start/clockTicks))
	}
}
