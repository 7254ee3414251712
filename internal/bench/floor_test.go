package bench

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestFloorProxyRelaysBothWays: the floor baseline must move every byte
// both ways, more than a socket buffer at a time (partial writes), and
// pass a half-close on, or its figures mean nothing.
func TestFloorProxyRelaysBothWays(t *testing.T) {
	backend := listenLoopback(t)
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c) // echo until the client half-closes
			}()
		}
	}()
	front := listenLoopback(t)
	addr := front.Addr().String()
	front.Close() // runFloor binds it itself

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runFloor(ctx, addr, []string{backend.Addr().String()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("floor proxy: %v", err)
		}
	})

	var c net.Conn
	var err error
	for range 100 { // bounded: the proxy is binding in its goroutine
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	payload := make([]byte, 8<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	testutil.EchoIntact(t, c, payload)
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
