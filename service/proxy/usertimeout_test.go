package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
)

// A client that stops reading while its backend sends holds its receive
// window shut, and Linux applies TCP_USER_TIMEOUT to the zero-window
// probes that follow as to unacknowledged data: with user_timeout set,
// such a client is treated as gone once it made no progress for that
// long, and reset (docs/configuration.md, timeouts.user_timeout). With
// user_timeout 0 it is kept however long it pauses, as without the proxy.
func TestPausedReaderAndTheUserTimeout(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		const size = 64 << 20 // more than every buffer on the way holds
		for _, user := range []time.Duration{time.Second, 0} {
			t.Run(fmt.Sprintf("user_timeout %s", user), func(t *testing.T) {
				// The backend's accept means the proxy counts the connection:
				// Open is 0 before that too, and a loaded machine may accept
				// only after a first look (measured on 2026-12-06 under -race
				// beside four busy loops: 0 after 0.74 s, then all 64 MiB).
				reached := make(chan struct{})
				backend := testutil.ServeAddr(t, func(c net.Conn) {
					close(reached)
					defer c.Close()
					c.SetDeadline(time.Now().Add(30 * time.Second))
					c.Write(make([]byte, size))
				})
				pool, err := balance.NewPool(config.RoundRobin, []config.Backend{{Name: "b", Address: backend}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				p := New(pool, Options{DialTimeout: time.Second, DialAttempts: 1, KeepAlive: 15 * time.Second,
					UserTimeout: user, AcceptBackoffMax: 100 * time.Millisecond}, testCounters(), slog.New(slog.DiscardHandler))
				c := dial(t, serveOnLoopback(t, usePlain(p, plain)))
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if user > 0 {
					select {
					case <-reached:
					case <-time.After(30 * time.Second):
						t.Fatal("the proxy never dialled the backend")
					}
					if !waitFor(func() bool { return p.Open() == 0 }) {
						t.Fatalf("a reader paused past the %s user timeout is still connected", user)
					}
				} else {
					time.Sleep(2 * time.Second) // paused: longer than the other case's user timeout
				}
				n, err := io.Copy(io.Discard, c)
				switch {
				case user > 0 && (n >= size || !errors.Is(err, syscall.ECONNRESET)):
					t.Fatalf("after the user timeout: %d of %d bytes, then %v; want a reset before the end", n, size, err)
				case user == 0 && (n != size || err != nil):
					t.Fatalf("without a user timeout: %d of %d bytes, then %v; want all of them", n, size, err)
				}
			})
		}
	})
}
