package bench

import (
	"os"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestSwitchesCountEveryThread: the context switches of a process are
// those of all its threads; the main thread's alone (/proc/<pid>/status)
// miss what Go's other threads do. Sleeping on a goroutine of its own
// thread each, this process switches more than its main thread does.
func TestSwitchesCountEveryThread(t *testing.T) {
	before, err := procSwitches(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			for range 50 {
				time.Sleep(100 * time.Microsecond)
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	after, err := procSwitches(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	mainOnly, err := procSwitchesOf("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50 || after <= mainOnly {
		t.Errorf("context switches: %d before, %d after 200 sleeps on 4 goroutines, the main thread's alone %d; want at least 50 more, and more than the main thread's", before, after, mainOnly)
	}
}

// A process's CPU time is read to the nanosecond, not in /proc's clock
// ticks of 10 ms (a thirty-sixth of a backend-SIGKILL storm's CPU), and agrees
// with the ticks within one.
func TestProcessCPUIsReadFinerThanClockTicks(t *testing.T) {
	deadline := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(deadline) { // some CPU of our own
	}
	cpu, _, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cpu%clockTick == 0 || cpu < 20*time.Millisecond {
		t.Fatalf("CPU time %s: want at least 20 ms, not whole ticks", cpu)
	}
	if testutil.Emulated() {
		return // qemu-user writes /proc/self/stat itself, with every time 0
	}
	ticks, _, err := statCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if (cpu - ticks).Abs() > 2*clockTick {
		t.Errorf("CPU time %s, in /proc's ticks %s: want them within two ticks", cpu, ticks)
	}
}
