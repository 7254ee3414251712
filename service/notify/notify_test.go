package notify

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestWatchdogPingsFourTimesPerPeriod: WATCHDOG=1 comes about every
// quarter of WATCHDOG_USEC, so a node that delays three pings in a row
// still keeps the daemon. The median gap is judged: a slow scheduler
// delays some pings, not the ticker's period.
func TestWatchdogPingsFourTimesPerPeriod(t *testing.T) {
	ns := testutil.NewNotifySocket(t)
	t.Setenv("NOTIFY_SOCKET", ns.Path)
	t.Setenv("WATCHDOG_USEC", "2000000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		New(slog.New(slog.DiscardHandler)).Watchdog(ctx, func() bool { return true })
	}()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, "seven watchdog pings", func() bool { return len(ns.Times("WATCHDOG=1")) >= 7 })
	at := ns.Times("WATCHDOG=1")
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	slices.Sort(gaps)
	// A quarter of 2 s is 500 ms; half, as pings came before, 1 s.
	if median := gaps[len(gaps)/2]; median >= 750*time.Millisecond {
		t.Errorf("median gap between watchdog pings %v (gaps %v), want about 500ms: a quarter of WATCHDOG_USEC=2s", median, gaps)
	}
}
