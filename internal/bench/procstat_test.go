package bench

import (
	"os"
	"testing"
	"time"
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
