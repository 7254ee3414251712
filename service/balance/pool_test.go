package balance

import (
	"maps"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

func threeBackends() []config.Backend {
	return []config.Backend{
		{Name: "a", Address: "127.0.0.1:1"},
		{Name: "b", Address: "127.0.0.1:2"},
		{Name: "c", Address: "127.0.0.1:3"},
	}
}

func newPool(t testing.TB, alg config.Algorithm) *Pool {
	t.Helper()
	p, err := NewPool(alg, threeBackends(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// apply feeds events to the backend called name.
func apply(p *Pool, name string, events ...Event) {
	for _, e := range events {
		p.Observe(p.Lookup(name), e)
	}
}

func countPicks(p *Pool, n int) map[string]int {
	got := map[string]int{}
	for i := 0; i < n; i++ {
		if b := p.Pick(nil); b != nil {
			got[b.Name]++
		} else {
			got["<nil>"]++
		}
	}
	return got
}

// wantPicks fails the test unless n picks land exactly as want says (a
// name left out gets none; "<nil>" counts picks of no backend).
func wantPicks(t *testing.T, p *Pool, n int, want map[string]int, what string) {
	t.Helper()
	if got := countPicks(p, n); !maps.Equal(got, want) {
		t.Errorf("%s: %d picks %v, want %v", what, n, got, want)
	}
}

func TestRoundRobinIsEven(t *testing.T) {
	wantPicks(t, newPool(t, config.RoundRobin), 300, map[string]int{"a": 100, "b": 100, "c": 100}, "three unchecked")
}

func TestRoundRobinSpreadsADownBackendsShare(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	apply(p, "b", CheckFailed)
	wantPicks(t, p, 300, map[string]int{"a": 150, "c": 150}, "b down")
}

func TestPickSkipsDownAndTried(t *testing.T) {
	for _, alg := range config.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			p := newPool(t, alg)
			apply(p, "b", CheckFailed)
			got := countPicks(p, 200)
			if got["b"] != 0 || got["<nil>"] != 0 || got["a"] == 0 || got["c"] == 0 {
				t.Errorf("with b down: picks %v, want only a and c", got)
			}
			a := p.Lookup("a")
			for i := 0; i < 50; i++ {
				if b := p.Pick([]*Backend{a}); b == nil || b.Name != "c" {
					t.Fatalf("a tried, b down: picked %v, want c", b)
				}
			}
			if b := p.Pick([]*Backend{a, p.Lookup("c")}); b != nil {
				t.Errorf("all tried or down: picked %s, want nil", b.Name)
			}
		})
	}
}

func TestSuspectIsAvoidedButNotExcluded(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	if !p.DialFailed(p.Lookup("a")) || p.DialFailed(p.Lookup("a")) {
		t.Error("DialFailed: want newly suspect once, then not again")
	}
	if got := countPicks(p, 90); got["a"] != 0 {
		t.Errorf("suspect backend picked %d times while others are fine", got["a"])
	}
	apply(p, "b", CheckFailed)
	apply(p, "c", DialFailed)
	if b := p.Pick(nil); b == nil || b.State() != Suspect {
		t.Errorf("only suspects left: picked %v, want a suspect", b)
	}
	apply(p, "a", CheckPassed)
	if s := p.Lookup("a").State(); s != Up {
		t.Errorf("a passing check left a suspect backend %s, want up", s)
	}
}

func TestLeastConnectionsPrefersIdle(t *testing.T) {
	p := newPool(t, config.LeastConnections)
	var untrack []func()
	for i := 0; i < 3; i++ {
		untrack = append(untrack, p.Lookup("a").Track(&nopCloser{}), p.Lookup("b").Track(&nopCloser{}))
	}
	for i := 0; i < 10; i++ {
		if b := p.Pick(nil); b.Name != "c" {
			t.Fatalf("picked %s with 3 open, want c with 0", b.Name)
		}
	}
	for _, u := range untrack {
		u()
	}
	if p.Lookup("a").Open() != 0 {
		t.Errorf("open = %d after untrack, want 0", p.Lookup("a").Open())
	}
}

func TestRandomTwoChoicesPrefersLessLoaded(t *testing.T) {
	p := newPool(t, config.RandomTwoChoices)
	for i := 0; i < 10; i++ {
		p.Lookup("a").Track(&nopCloser{})
	}
	got := countPicks(p, 600)
	if got["a"] >= got["b"] || got["a"] >= got["c"] {
		t.Errorf("loaded backend a picked %d times, b %d, c %d: want a least", got["a"], got["b"], got["c"])
	}
}

func TestUpdateKeepsUnchangedBackends(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	a := p.Lookup("a")
	apply(p, "a", CheckPassed)
	untrack := a.Track(&nopCloser{})
	defer untrack()
	added, removed := p.Update([]config.Backend{
		{Name: "a", Address: "127.0.0.1:1"},
		{Name: "d", Address: "127.0.0.1:4"},
	})
	if len(added) != 1 || added[0].Name != "d" {
		t.Errorf("added = %v, want [d]", added)
	}
	if len(removed) != 2 {
		t.Errorf("removed %d backends, want 2 (b, c)", len(removed))
	}
	if p.Lookup("a") != a || a.State() != Up || a.Open() != 1 {
		t.Error("unchanged backend a lost its identity, state or connections")
	}
	for _, b := range removed {
		if b.Rotation() != Removed {
			t.Errorf("removed backend %s is %s", b.Name, b.Rotation())
		}
		if b := p.Pick(p.Backends()); b != nil {
			t.Errorf("every backend in the pool tried: picked %s", b.Name)
		}
	}
}

func TestRecoveringBackendIsLastResort(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	p.SetThresholds(Thresholds{Rise: 2, Fall: 2})
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckFailed)
	}
	if b := p.Pick(nil); b != nil {
		t.Fatalf("all down, none recovering: picked %s", b.Name)
	}
	apply(p, "c", CheckPassed)
	if b := p.Pick(nil); b == nil || b.Name != "c" {
		t.Fatalf("all down, c passed its latest check: picked %v, want c", b)
	}
	apply(p, "c", CheckFailed)
	if b := p.Pick(nil); b != nil {
		t.Errorf("c failed again: picked %s", b.Name)
	}
	apply(p, "c", CheckPassed)
	apply(p, "a", CheckPassed, CheckPassed) // rise = 2
	for i := 0; i < 10; i++ {
		if b := p.Pick(nil); b.Name != "a" {
			t.Fatalf("a is up: picked %s, a recovering backend is only a last resort", b.Name)
		}
	}
}

func TestEvacuateAllEvacuatesTracked(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	b := p.Lookup("a")
	var n int
	b.Track(&closeCounter{&n})
	if got := b.EvacuateAll(); got != 1 || n != 10 {
		t.Errorf("EvacuateAll touched %d (counter %d), want 1 evacuated", got, n)
	}
}

func TestCloseAllClosesTracked(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	b := p.Lookup("a")
	var closed int
	for i := 0; i < 3; i++ {
		b.Track(&closeCounter{&closed})
	}
	if n := b.CloseAll(); n != 3 || closed != 3 {
		t.Errorf("CloseAll closed %d (counted %d), want 3", n, closed)
	}
}

type nopCloser struct{ _ int }

func (*nopCloser) Close() error { return nil }
func (*nopCloser) Evacuate()    {}

type closeCounter struct{ n *int }

func (c *closeCounter) Close() error { *c.n++; return nil }
func (c *closeCounter) Evacuate()    { *c.n += 10 }

var _ Conn = &closeCounter{}

func BenchmarkPick(b *testing.B) {
	for _, alg := range config.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			p := newPool(b, alg)
			for _, n := range []string{"a", "b", "c"} {
				apply(p, n, CheckPassed) // the steady state: every backend up
			}
			b.ReportAllocs()
			for b.Loop() {
				if p.Pick(nil) == nil {
					b.Fatal("no backend")
				}
			}
		})
	}
}

// TestSetAlgorithmWhilePicking: a reload changes the algorithm while
// connections pick (run with -race).
func TestSetAlgorithmWhilePicking(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			p.Pick(nil)
		}
	}()
	for i := 0; i < 100; i++ {
		p.SetAlgorithm(config.Algorithms[i%len(config.Algorithms)])
	}
	<-done
}

// TestStartingBackendsShareWithTheFirstUp: at a daemon's start, the first
// backend whose check passes must not take every connection of the
// reconnect storm while the others' first checks are still running (the
// storm bench's socket-activated restart found 32/32/236 over three).
func TestStartingBackendsShareWithTheFirstUp(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	apply(p, "c", CheckPassed)
	wantPicks(t, p, 300, map[string]int{"a": 100, "b": 100, "c": 100}, "c up, a and b not checked yet since the start")
	// A failed dial ends that standing: the backend waits for its check.
	p.DialFailed(p.Lookup("a"))
	wantPicks(t, p, 300, map[string]int{"b": 150, "c": 150}, "a failed a dial before its first check")
	apply(p, "b", CheckFailed)
	wantPicks(t, p, 30, map[string]int{"c": 30}, "b down")
}

// TestAddedBackendWaitsForItsCheck: a backend a reload or discovery adds
// is not picked before its first check while a checked one is up.
func TestAddedBackendWaitsForItsCheck(t *testing.T) {
	p := newPool(t, config.RoundRobin)
	for _, n := range []string{"a", "b", "c"} {
		apply(p, n, CheckPassed)
	}
	p.Update(append(threeBackends(), config.Backend{Name: "d", Address: "127.0.0.1:4"}))
	wantPicks(t, p, 300, map[string]int{"a": 100, "b": 100, "c": 100}, "d added, not checked yet")
}
