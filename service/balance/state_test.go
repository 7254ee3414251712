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
		Unknown:    {CheckUp: Up, CheckDown: Down, CheckPassed: Unknown, CheckFailed: Unknown, DialFailed: Unknown, Loops: Down},
		Up:         {CheckUp: Up, CheckDown: Down, CheckPassed: Up, CheckFailed: Up, DialFailed: Suspect, Loops: Down},
		Suspect:    {CheckUp: Up, CheckDown: Down, CheckPassed: Up, CheckFailed: Suspect, DialFailed: Suspect, Loops: Down},
		Down:       {CheckUp: Up, CheckDown: Down, CheckPassed: Recovering, CheckFailed: Down, DialFailed: Down, Loops: Down},
		Recovering: {CheckUp: Up, CheckDown: Down, CheckPassed: Recovering, CheckFailed: Down, DialFailed: Down, Loops: Down},
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
	if got := next(numStates, CheckUp); got != numStates {
		t.Errorf("an invalid state moved to %s", got)
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
		apply(p, n, CheckUp)
	}
	a := p.Lookup("a")
	p.SetDraining(a, true)
	if got := countPicks(p, 30); got["a"] != 0 {
		t.Errorf("draining backend picked %d times", got["a"])
	}
	apply(p, "a", CheckDown)
	p.SetDraining(a, false)
	if a.State() != Down || a.Draining() {
		t.Errorf("undrained: %s draining=%v, want down and in rotation", a.State(), a.Draining())
	}
}

// A reload to many new backends must not send clients to ones never
// checked while a known good one exists.
func TestUnknownNotPickedWhileKnownGood(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	apply(p, "a", CheckUp)
	p.Update(append(threeBackends(), config.Backend{Name: "d", Address: "127.0.0.1:4"}))
	if got := countPicks(p, 40); got["a"] != 40 {
		t.Errorf("a up, the others unknown: picks %v, want all on a", got)
	}
	apply(p, "a", DialFailed)
	if got := countPicks(p, 40); got["a"] != 40 {
		t.Errorf("a suspect, the others unknown: picks %v, want all on a", got)
	}
}

func TestPanicMode(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	var seen []Transition
	p.SetObserver(func(tr Transition) { seen = append(seen, tr) })
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckUp)
	}
	apply(p, "a", CheckDown)
	if on, _ := p.Panic(); on {
		t.Fatal("one of three down: panic mode")
	}
	tr := p.Observe(p.Lookup("b"), CheckDown)
	if !tr.Panic || !tr.PanicChanged {
		t.Fatalf("two of three down at once: %+v, want panic mode entered", tr)
	}
	if got := countPicks(p, 30); got["c"] != 30 {
		t.Errorf("panic, c still up: picks %v, want c first", got)
	}
	apply(p, "c", CheckDown)
	got := countPicks(p, 30)
	if got["b"] != 15 || got["c"] != 15 {
		t.Errorf("panic, all down: picks %v, want b and c (the last known good), not a", got)
	}
	apply(p, "a", CheckPassed)
	if b := p.Pick(nil); b == nil || b.Name != "a" {
		t.Errorf("panic: a recovering backend comes before the last known good; picked %v", b)
	}
	apply(p, "a", CheckUp)
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
		apply(p, n, CheckUp)
	}
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckDown)
	}
	if on, _ := p.Panic(); !on {
		t.Fatal("all down at once: no panic mode")
	}
	apply(p, "a", CheckUp)
	if on, _ := p.Panic(); !on {
		t.Fatal("one of three up: panic mode ended")
	}
	tr := p.Observe(p.Lookup("b"), CheckUp)
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
		apply(q, n, CheckDown)
	}
	if on, _ := q.Panic(); on {
		t.Error("every backend down from the start: panic mode")
	}
}

func TestObserverCountsTransitions(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	var seen []string
	p.SetObserver(func(tr Transition) { seen = append(seen, fmt.Sprintf("%s %s>%s", tr.Backend.Name, tr.From, tr.To)) })
	before := time.Now()
	apply(p, "a", CheckUp, CheckPassed, DialFailed, CheckFailed, CheckPassed)
	n, last := p.Lookup("a").Transitions()
	if n != 3 || last.Before(before) {
		t.Errorf("transitions %d at %v, want 3 after %v", n, last, before)
	}
	want := "[a unknown>up a up>suspect a suspect>up]"
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
