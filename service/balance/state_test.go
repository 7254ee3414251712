package balance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// Every transition of the machine, written out once more: a change to the
// table in state.go must change this one too.
func TestTransitions(t *testing.T) {
	want := map[State]map[Event]State{
		Unknown:    {CheckPassed: Up, CheckRise: Up, CheckFailed: Down, CheckFall: Down, DialFailed: Unknown, Loops: Down},
		Starting:   {CheckPassed: Up, CheckRise: Up, CheckFailed: Down, CheckFall: Down, DialFailed: Unknown, Loops: Down},
		Up:         {CheckPassed: Up, CheckRise: Up, CheckFailed: Up, CheckFall: Down, DialFailed: Suspect, Loops: Down},
		Suspect:    {CheckPassed: Up, CheckRise: Up, CheckFailed: Suspect, CheckFall: Down, DialFailed: Suspect, Loops: Down},
		Down:       {CheckPassed: Recovering, CheckRise: Up, CheckFailed: Down, CheckFall: Down, DialFailed: Down, Loops: Down},
		Recovering: {CheckPassed: Recovering, CheckRise: Up, CheckFailed: Down, CheckFall: Down, DialFailed: Down, Loops: Down},
	}
	for s := State(0); s < numStates; s++ {
		for e := Event(0); e < numEvents; e++ {
			w, ok := want[s][e]
			if !ok {
				t.Errorf("%s on %s: not in the test table", s, e)
				continue
			}
			if got := next(s, e); got != w {
				t.Errorf("%s on %s: %s, want %s", s, e, got, w)
			}
		}
	}
	if got := next(numStates, CheckRise); got != numStates {
		t.Errorf("an invalid state moved to %s", got)
	}
}

// The machine with its counting: a sequence of reported events and the
// state after each, for thresholds rise and fall. P and F are a passed and
// a failed check as the checker reports them.
func TestCountedTransitions(t *testing.T) {
	const P, F = CheckPassed, CheckFailed
	for _, tc := range []struct {
		name       string
		rise, fall int
		events     []Event
		states     []State
	}{
		{"the first success decides", 2, 3, []Event{P}, []State{Up}},
		{"the first failure decides", 2, 3, []Event{F}, []State{Down}},
		{"up stays up until fall failures", 2, 3, []Event{P, F, F, F}, []State{Up, Up, Up, Down}},
		{"a success resets the failure count", 2, 2, []Event{P, F, P, F, F}, []State{Up, Up, Up, Up, Down}},
		{"down recovers until rise successes", 3, 2, []Event{F, P, P, P}, []State{Down, Recovering, Recovering, Up}},
		{"a failure resets the success count", 2, 2, []Event{F, P, F, P, P}, []State{Down, Recovering, Down, Recovering, Up}},
		{"rise and fall of 1 flip at once", 1, 1, []Event{P, F, P, F}, []State{Up, Down, Up, Down}},
		{"thresholds below 1 count as 1", 0, -5, []Event{P, F, P}, []State{Up, Down, Up}},
		{"full cycle up down up", 2, 2, []Event{P, F, F, P, P, F, F}, []State{Up, Up, Down, Recovering, Up, Up, Down}},
		// A self-loop marks a backend down while its checks
		// pass. The checks that pass after it must bring it up, not leave
		// it recovering (a last-resort tier) for good.
		{"self-loop then passing checks: up", 2, 3, []Event{P, P, P, Loops, P, P, P}, []State{Up, Up, Up, Down, Recovering, Up, Up}},
		{"self-loop from starting", 2, 3, []Event{Loops, P, P}, []State{Down, Recovering, Up}},
		{"a dial failure before the first check: unknown", 2, 3, []Event{DialFailed, DialFailed, P}, []State{Unknown, Unknown, Up}},
		{"self-loop clears the failure count", 2, 2, []Event{P, F, Loops, P, F, F}, []State{Up, Up, Down, Recovering, Down, Down}},
		{"a dial failure leaves the counting alone", 2, 2, []Event{P, F, DialFailed, F}, []State{Up, Up, Suspect, Down}},
		{"suspect back up on one pass", 3, 3, []Event{P, DialFailed, P}, []State{Up, Suspect, Up}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, config.RoundRobin)
			p.SetThresholds(Thresholds{Rise: tc.rise, Fall: tc.fall})
			b := p.Lookup("a")
			for i, e := range tc.events {
				p.Observe(b, e)
				if got := b.State(); got != tc.states[i] {
					t.Fatalf("after event %d (%s): %s, want %s", i, e, got, tc.states[i])
				}
			}
		})
	}
}

// The transition says which event the machine saw and the count behind it.
func TestTransitionNamesTheCount(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	p.SetThresholds(Thresholds{Rise: 2, Fall: 3})
	b := p.Lookup("a")
	apply(p, "a", CheckPassed, CheckFailed, CheckFailed)
	tr := p.Observe(b, CheckFailed)
	if tr.Event != CheckFall || tr.Streak != 3 || tr.From != Up || tr.To != Down {
		t.Errorf("third failure: %s streak %d %s>%s, want check-fall streak 3 up>down", tr.Event, tr.Streak, tr.From, tr.To)
	}
	if tr := p.Observe(b, Loops); tr.Streak != 0 {
		t.Errorf("loops: streak %d, want 0", tr.Streak)
	}
}

func TestRotation(t *testing.T) {
	for _, c := range []struct {
		from          Rotation
		drain, remove bool
		want          Rotation
	}{
		{InRotation, false, false, InRotation},
		{InRotation, true, false, Draining},
		{Draining, false, false, InRotation},
		{Draining, true, false, Draining},
		{InRotation, false, true, Removed},
		{Draining, false, true, Removed},
		{Removed, false, false, Removed}, // undrain cannot bring it back
		{Removed, true, false, Removed},
	} {
		if got := nextRotation(c.from, c.drain, c.remove); got != c.want {
			t.Errorf("%s drain=%v remove=%v: %s, want %s", c.from, c.drain, c.remove, got, c.want)
		}
	}
}

// The draining backend keeps following its checks and comes back in the
// state they left it in.
func TestDrainingKeepsState(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	a := p.Lookup("a")
	p.SetDraining(a, true)
	if got := countPicks(p, 30); got["a"] != 0 {
		t.Errorf("draining backend picked %d times", got["a"])
	}
	apply(p, "a", CheckFailed)
	p.SetDraining(a, false)
	if a.State() != Down || a.Draining() {
		t.Errorf("undrained: %s draining=%v, want down and in rotation", a.State(), a.Draining())
	}
}

// A reload to many new backends must not send clients to ones never
// checked while a known good one exists.
func TestUnknownNotPickedWhileKnownGood(t *testing.T) {
	p, err := NewPool(config.RoundRobin, threeBackends()[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	apply(p, "a", CheckPassed)
	p.Update(append(threeBackends(), config.Backend{Name: "d", Address: "127.0.0.1:4"}))
	wantPicks(t, p, 40, map[string]int{"a": 40}, "a up, the others unknown")
	apply(p, "a", DialFailed)
	wantPicks(t, p, 40, map[string]int{"a": 40}, "a suspect, the others unknown")
}

func TestPanicMode(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	p.SetThresholds(Thresholds{Rise: 2, Fall: 1})
	var seen []Transition
	p.SetObserver(func(tr Transition) { seen = append(seen, tr) })
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	apply(p, "a", CheckFailed)
	if on, _ := p.Panic(); on {
		t.Fatal("one of three down: panic mode")
	}
	tr := p.Observe(p.Lookup("b"), CheckFailed)
	if !tr.Panic || !tr.PanicChanged {
		t.Fatalf("two of three down at once: %+v, want panic mode entered", tr)
	}
	wantPicks(t, p, 30, map[string]int{"c": 30}, "panic, c still up: c first")
	apply(p, "c", CheckFailed)
	wantPicks(t, p, 30, map[string]int{"b": 15, "c": 15}, "panic, all down: b and c (the last known good), not a")
	apply(p, "a", CheckPassed)
	if b := p.Pick(nil); b == nil || b.Name != "a" {
		t.Errorf("panic: a recovering backend comes before the last known good; picked %v", b)
	}
	apply(p, "a", CheckPassed)
	if on, _ := p.Panic(); !on {
		t.Error("one of three up is below half: panic mode ended")
	}
	if len(seen) == 0 || !seen[len(seen)-1].Panic {
		t.Error("the observer was not told of the panic")
	}
}

func TestPanicModeEnds(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckFailed)
	}
	if on, _ := p.Panic(); !on {
		t.Fatal("all down at once: no panic mode")
	}
	apply(p, "a", CheckPassed)
	if on, _ := p.Panic(); !on {
		t.Fatal("one of three up: panic mode ended")
	}
	tr := p.Observe(p.Lookup("b"), CheckPassed)
	if tr.Panic || !tr.PanicChanged {
		t.Errorf("two of three up: %+v, want panic mode ended", tr)
	}
	for _, b := range p.Backends() {
		if b.Good() {
			t.Errorf("%s still marked last known good after the panic", b.Name)
		}
	}
	// Never having been up is no panic: a start with every backend down.
	q := newPool(t, config.RoundRobin)
	for _, n := range []string{"a", "b", "c"} {
		apply(q, n, CheckFailed)
	}
	if on, _ := q.Panic(); on {
		t.Error("every backend down from the start: panic mode")
	}
}

func TestObserverCountsTransitions(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	p.SetThresholds(Thresholds{Rise: 2, Fall: 2})
	var seen []string
	p.SetObserver(func(tr Transition) { seen = append(seen, fmt.Sprintf("%s %s>%s", tr.Backend.Name, tr.From, tr.To)) })
	before := time.Now()
	apply(p, "a", CheckPassed, CheckPassed, DialFailed, CheckFailed, CheckPassed)
	n, last := p.Lookup("a").Transitions()
	if n != 3 || last.Before(before) {
		t.Errorf("transitions %d at %v, want 3 after %v", n, last, before)
	}
	want := "[a starting>up a up>suspect a suspect>up]"
	if fmt.Sprint(seen) != want {
		t.Errorf("observer saw %v, want %s", seen, want)
	}
}

func TestLocalFault(t *testing.T) {
	for _, c := range []struct {
		err   error
		local bool
	}{
		{os.NewSyscallError("socket", syscall.EMFILE), true},
		{fmt.Errorf("tcp connect: %w", os.NewSyscallError("socket", syscall.ENFILE)), true},
		{syscall.ENOBUFS, true},
		{syscall.ENOMEM, true},
		{syscall.EADDRNOTAVAIL, true},
		{fmt.Errorf("https GET /readyz: %w", context.Canceled), true},
		{syscall.ECONNREFUSED, false},
		{context.DeadlineExceeded, false},
		{errors.New("status 500"), false},
		{nil, false},
	} {
		if got := LocalFault(c.err); got != c.local {
			t.Errorf("LocalFault(%v) = %v, want %v", c.err, got, c.local)
		}
	}
}

// Out of descriptors, Go's resolver says "no such host" like a real
// NXDOMAIN: a lookup failing while no descriptor can be opened is local.
func TestLocalFaultLookupOutOfDescriptors(t *testing.T) {
	nxdomain := &net.DNSError{Err: "no such host", Name: "apiserver.example", IsNotFound: true}
	if LocalFault(nxdomain) {
		t.Fatal("a lookup failure with descriptors to spare counted as local")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	low := lim
	low.Cur = uint64(len(ents) + 8)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for range 64 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	local := LocalFault(nxdomain)
	if !local {
		t.Error("a lookup failure while out of descriptors counted against the backend")
	}
}

// 16 discovered members that never came up and one static
// backend. The static one restarts: panic mode comes on (every backend
// known good is down) and goes off once it is healthy again. Before, the
// dead members counted, one healthy of 17 stayed "under half", and panic
// mode (and with it close_on_down) stayed on for good.
func TestPanicModeCountsOnlyKnownGoodBackends(t *testing.T) {
	list := []config.Backend{{Name: "static", Address: "127.0.0.1:1"}}
	for i := range 16 {
		list = append(list, config.Backend{Name: fmt.Sprintf("dead%d", i), Address: fmt.Sprintf("127.0.0.2:%d", i+1)})
	}
	p, err := NewPool(config.RoundRobin, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SetThresholds(Thresholds{Rise: 1, Fall: 1})
	for i := range 16 {
		apply(p, fmt.Sprintf("dead%d", i), CheckFailed)
	}
	apply(p, "static", CheckPassed)
	if on, _ := p.Panic(); on {
		t.Fatal("the static backend up, 16 members never up: panic mode")
	}
	apply(p, "static", CheckFailed)
	if on, _ := p.Panic(); !on {
		t.Fatal("the only backend ever up went down: no panic mode")
	}
	apply(p, "static", CheckPassed)
	if on, _ := p.Panic(); on {
		t.Error("the static backend is healthy again, yet panic mode stays on (the members that never came up count)")
	}
	// A member that was up counts once it is.
	apply(p, "dead0", CheckPassed)
	apply(p, "dead1", CheckPassed)
	apply(p, "dead0", CheckFailed)
	apply(p, "dead1", CheckFailed)
	if on, _ := p.Panic(); !on {
		t.Error("two of three known good backends down at once: no panic mode")
	}
}

// Every backend the pool is built with starts Starting; one a reload adds
// starts Unknown. Both read back by name (/status, the CLI).
func TestInitialStates(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	for _, b := range p.Backends() {
		if b.State() != Starting {
			t.Errorf("%s at the start: %s, want starting", b.Name, b.State())
		}
	}
	added, _ := p.Update(append(threeBackends(), config.Backend{Name: "d", Address: "127.0.0.1:4"}))
	if len(added) != 1 || added[0].State() != Unknown {
		t.Fatalf("added by a reload: %v, want d unknown", added)
	}
	for _, s := range States() {
		var back State
		text, _ := s.MarshalText()
		if err := back.UnmarshalText(text); err != nil || back != s {
			t.Errorf("%s read back as %s (%v)", s, back, err)
		}
	}
}

// Readiness of one backend: checks that pass, in rotation; a backend
// without a verdict never counts, though Pick takes a starting one.
func TestTakesConnections(t *testing.T) {
	for _, s := range States() {
		for _, r := range []Rotation{InRotation, Draining, Removed} {
			want := (s == Up || s == Suspect) && r == InRotation
			if got := s.TakesConnections(r); got != want {
				t.Errorf("%s %s: takes connections %v, want %v", s, r, got, want)
			}
		}
	}
	p := newPool(t, config.RoundRobin)
	a := p.Lookup("a")
	if a.TakesConnections() {
		t.Error("a starting backend takes connections")
	}
	apply(p, "a", CheckPassed)
	if !a.TakesConnections() {
		t.Error("an up backend does not take connections")
	}
	p.SetDraining(a, true)
	if a.TakesConnections() {
		t.Error("a draining backend takes connections")
	}
}
