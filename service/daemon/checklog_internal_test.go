package daemon

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// Check results log one line per transition up or down, with the count
// behind it; a backend flapping between down and recovering logs nothing
// more, and checks that change nothing log nothing.
func TestCheckResultsLogOneLinePerTransition(t *testing.T) {
	var out strings.Builder
	log := slog.New(slog.NewTextHandler(&out, nil))
	pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "a", Address: "127.0.0.1:1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.SetThresholds(balance.Thresholds{Rise: 2, Fall: 2})
	b := pool.Lookup("a")
	refused := errors.New("connection refused")
	for _, passed := range []bool{true, true, false, false, false, true, false, true, true, true} {
		e, err := balance.CheckFailed, refused
		if passed {
			e, err = balance.CheckPassed, nil
		}
		logTransition(log, pool.Observe(b, e), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`level=INFO msg="backend up" backend=a address=127.0.0.1:1 from=starting to=up reason="first check succeeded"`,
		`level=WARN msg="backend down" backend=a address=127.0.0.1:1 from=up to=down reason="2 consecutive failed checks, last: connection refused"`,
		`level=INFO msg="backend up" backend=a address=127.0.0.1:1 from=recovering to=up reason="2 consecutive successful checks"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if !strings.HasSuffix(lines[i], want[i]) {
			t.Errorf("line %d:\n%s\nwant it to end in\n%s", i, lines[i], want[i])
		}
	}
}

// STATUS= and the log count the backends as /readyz does: a draining
// backend takes no new connections, so it is not counted healthy (the
// daemon once counted it).
func TestHealthyCountLeavesOutDraining(t *testing.T) {
	pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "a", Address: "127.0.0.1:1"}, {Name: "b", Address: "127.0.0.1:2"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := &portServer{pool: pool}
	for _, b := range pool.Backends() {
		pool.Observe(b, balance.CheckPassed)
	}
	pool.SetDraining(pool.Lookup("a"), true)
	if got := ps.healthyCount(); got != "1/2" {
		t.Errorf("one of two up backends draining: %s healthy, want 1/2", got)
	}
	pool.SetDraining(pool.Lookup("b"), true)
	if ps.anyServing() {
		t.Error("every backend draining: still usable at start")
	}
}
