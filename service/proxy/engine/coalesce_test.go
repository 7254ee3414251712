package engine

import (
	"testing"
	"time"
)

// TestCoalescerPausesOnlyForPushesComingSoon: the parker pauses once in
// a wake that came within coalesceGap of its last wait and passed on
// pushes only, and in no other. A fake clock: the sleeps advance it.
func TestCoalescerPausesOnlyForPushesComingSoon(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	var slept []time.Duration
	c := coalescer{
		now:   func() time.Time { return clock },
		sleep: func(d time.Duration) { slept = append(slept, d); clock = clock.Add(d) },
	}
	// wake is one wake of the parker at the given time after its last
	// wait, each round of it passing on pushes only or not; it returns
	// how many times the parker paused.
	wake := func(at time.Duration, pushesOnly ...bool) int {
		clock = clock.Add(at)
		c.woke()
		pauses := 0
		for _, pushes := range pushesOnly {
			if !c.pauseInsteadOfWait(pushes) {
				return pauses
			}
			pauses++
		}
		t.Fatal("the parker paused after its last round")
		return pauses
	}
	soon, late := coalesceGap/3, coalesceGap
	steps := []struct {
		name  string
		pause int
		got   int
	}{
		{"first wake, pushes", 0, wake(time.Second, true)},
		{"woken soon, pushes, then pushes again", 1, wake(soon, true, true)},
		{"woken soon, pushes, then an answer", 1, wake(soon, true, false)},
		{"woken soon, an answer", 0, wake(soon, false)},
		{"woken a gap after its wait, pushes", 0, wake(late, true)},
		{"woken soon, pushes", 1, wake(soon, true, false)},
	}
	for _, s := range steps {
		if s.got != s.pause {
			t.Errorf("%s: %d pauses, want %d", s.name, s.got, s.pause)
		}
	}
	for _, d := range slept {
		if d != coalescePause {
			t.Errorf("paused %v, want %v", d, coalescePause)
		}
	}
}
