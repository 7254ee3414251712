package balance

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// The grace of these tests: short, since nothing here asserts how long
// anything took; the waits are for conditions.
const grace = 5 * time.Millisecond

// evacConn is a tracked connection that counts its evacuations and may
// call back into the pool as the proxy's do (a replay picks and dials).
type evacConn struct {
	n          atomic.Int32
	onEvacuate func()
}

func (c *evacConn) Close() error { return nil }
func (c *evacConn) Evacuate() {
	if c.onEvacuate != nil {
		c.onEvacuate()
	}
	c.n.Add(1)
}

// evacPool is three backends (a, b, c) with evacuation on, rise and fall
// of one, and the evacuations it reports.
func evacPool(t *testing.T) (*Pool, *atomic.Int32) {
	t.Helper()
	p := newPool(t, config.RoundRobin)
	p.SetThresholds(Thresholds{Rise: 1, Fall: 1})
	p.SetEvacuation(Evacuation{On: true, Grace: grace})
	var reported atomic.Int32
	p.SetEvacuated(func(_ *Backend, n int) { reported.Add(int32(n)) })
	return p, &reported
}

func track(p *Pool, name string) *evacConn {
	c := &evacConn{}
	p.Lookup(name).Track(c)
	return c
}

// waitFor waits for cond; the timeout only ends a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle gives a timer that should not act many times its grace to act
// anyway: a test that passes without seeing it act proves nothing only
// on a machine too loaded to run it, and fails never for load.
func settle() { time.Sleep(100 * grace) }

func (p *Pool) awaiting(b *Backend) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.awaitingUp, b)
}

// A backend that goes down loses its connections once the grace is over;
// the others keep theirs.
func TestDownBackendEvacuatedAfterGrace(t *testing.T) {
	p, reported := evacPool(t)
	apply(p, "a", CheckPassed)
	apply(p, "b", CheckPassed)
	apply(p, "c", CheckPassed)
	ca, cb := track(p, "a"), track(p, "b")
	apply(p, "a", CheckFailed)
	waitFor(t, "a's connection evacuated", func() bool { return ca.n.Load() == 1 })
	waitFor(t, "the evacuation reported", func() bool { return reported.Load() == 1 })
	settle()
	if ca.n.Load() != 1 || cb.n.Load() != 0 {
		t.Errorf("evacuations: a's %d, b's %d; want 1 and 0", ca.n.Load(), cb.n.Load())
	}
}

// close_on_down off, a backend up again within the grace, or a reload
// that removed it meanwhile: its connections stay. So do they when a
// self-loop took it down rather than its checks: the self-loop stops new
// dials to it, its checks decide about the open connections.
func TestDownBackendKeptWhenNoLongerEvacuable(t *testing.T) {
	nothing := func(*Pool) {}
	for _, tc := range []struct {
		name  string
		down  Event
		after func(p *Pool)
	}{
		{"close_on_down off", CheckFailed, func(p *Pool) { p.SetEvacuation(Evacuation{Grace: grace}) }},
		{"up again", CheckFailed, func(p *Pool) { apply(p, "a", CheckPassed) }},
		{"removed", CheckFailed, func(p *Pool) { p.Update(threeBackends()[1:]) }},
		{"self-loop", Loops, nothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The change that makes the backend no longer evacuable
			// follows its mark-down at once; a grace of 2 s leaves a
			// starved machine ample time for that, and the subtests
			// wait it out side by side.
			t.Parallel()
			p, _ := evacPool(t)
			p.SetEvacuation(Evacuation{On: true, Grace: 400 * grace})
			for _, n := range []string{"a", "b", "c"} {
				apply(p, n, CheckPassed)
			}
			ca := track(p, "a")
			apply(p, "a", tc.down)
			tc.after(p)
			time.Sleep(400 * grace)
			settle()
			if n := ca.n.Load(); n != 0 {
				t.Errorf("evacuated %d times, want none", n)
			}
		})
	}
}

// Panic mode cuts no connection: the first backends down within a check
// interval keep theirs when the others follow.
func TestPanicKeepsConnections(t *testing.T) {
	p, _ := evacPool(t)
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	ca, cb := track(p, "a"), track(p, "b")
	apply(p, "a", CheckFailed)
	if tr := p.Observe(p.Lookup("b"), CheckFailed); !tr.Panic {
		t.Fatal("two of three down: no panic mode")
	}
	settle()
	if ca.n.Load() != 0 || cb.n.Load() != 0 {
		t.Errorf("panic mode: evacuated a's %d, b's %d times, want none", ca.n.Load(), cb.n.Load())
	}
}

// At start-up every first check fails (a slow host) and a connection went
// to a down backend as the last resort: it stays while no backend takes
// new connections, and goes when one comes up. Its evacuation calls back
// into the pool (a replay picks and may fail a dial): no deadlock.
func TestEvacuationWaitsForABackendUp(t *testing.T) {
	p, reported := evacPool(t)
	ca := track(p, "a")
	ca.onEvacuate = func() {
		if b := p.Pick([]*Backend{p.Lookup("a")}); b != nil {
			p.DialFailed(b)
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckFailed)
	}
	if on, _ := p.Panic(); on {
		t.Fatal("never up, all down: panic mode")
	}
	waitFor(t, "a's grace over", func() bool { return p.awaiting(p.Lookup("a")) || ca.n.Load() > 0 })
	settle()
	if n := ca.n.Load(); n != 0 {
		t.Fatalf("no backend up: evacuated %d times, want kept", n)
	}
	apply(p, "b", CheckPassed)
	if ca.n.Load() != 1 || reported.Load() != 1 {
		t.Errorf("b up: a's connection evacuated %d times (reported %d), want once", ca.n.Load(), reported.Load())
	}
	if p.awaiting(p.Lookup("a")) {
		t.Error("a still waits after its evacuation")
	}
}

// A healthy backend the operator puts back in rotation also ends the wait.
func TestEvacuationWaitsForABackendUndrained(t *testing.T) {
	p, _ := evacPool(t)
	b := p.Lookup("b")
	apply(p, "b", CheckPassed)
	p.SetDraining(b, true)
	ca := track(p, "a")
	apply(p, "a", CheckFailed)
	apply(p, "c", CheckFailed)
	waitFor(t, "a's grace over", func() bool { return p.awaiting(p.Lookup("a")) || ca.n.Load() > 0 })
	settle()
	if n := ca.n.Load(); n != 0 {
		t.Fatalf("b drained, no backend up: evacuated %d times, want kept", n)
	}
	p.SetDraining(b, false)
	if n := ca.n.Load(); n != 1 {
		t.Errorf("b undrained: a's connection evacuated %d times, want once", n)
	}
}
