package notify

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestWatchdogPingsFourTimesPerPeriod: WATCHDOG=1 comes about every
// quarter of WATCHDOG_USEC, so a node that delays three pings in a row
// still keeps the daemon. The median gap is judged: a slow scheduler
// delays some pings, not the ticker's period.
func TestWatchdogPingsFourTimesPerPeriod(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mu sync.Mutex
	var at []time.Time
	go func() {
		buf := make([]byte, 256)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			if string(buf[:k]) == "WATCHDOG=1" {
				mu.Lock()
				at = append(at, time.Now())
				mu.Unlock()
			}
		}
	}()
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "2000000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		New(slog.New(slog.DiscardHandler)).Watchdog(ctx, func() bool { return true })
	}()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, "seven watchdog pings", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(at) >= 7
	})
	mu.Lock()
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	mu.Unlock()
	slices.Sort(gaps)
	// A quarter of 2 s is 500 ms; half, as pings came before, 1 s.
	if median := gaps[len(gaps)/2]; median >= 750*time.Millisecond {
		t.Errorf("median gap between watchdog pings %v (gaps %v), want about 500ms: a quarter of WATCHDOG_USEC=2s", median, gaps)
	}
}
