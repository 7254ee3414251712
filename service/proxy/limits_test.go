package proxy

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

func TestDerivedMaxConnections(t *testing.T) {
	for _, c := range []struct {
		nofile   uint64
		backends int
		want     int
	}{
		{1024, 3, (1024 - 64 - 16 - 16 - 6 - 128) / 2}, // 397
		{65536, 3, (65536 - 64 - 16 - 16 - 6 - 8192) / 2},
		{256, 3, (256 - 64 - 16 - 16 - 6 - 32) / 2},
		{64, 3, 1},            // too small to reserve anything: one connection still goes through
		{1 << 40, 3, 1 << 30}, // an "unlimited" table still gives a finite cap
	} {
		got := DerivedMaxConnections(c.nofile, c.backends, 16)
		if got != c.want {
			t.Errorf("nofile %d, %d backends: %d, want %d", c.nofile, c.backends, got, c.want)
		}
		if used := uint64(2*got + 64 + 16 + 16 + 2*c.backends); got > 1 && used+c.nofile/8 > c.nofile {
			t.Errorf("nofile %d: the cap %d and the reserve need %d descriptors", c.nofile, got, used)
		}
	}
}

// Past MaxConnections a client is closed in the accept loop; the open
// ones carry on, and a slot freed is taken again.
func TestMaxConnectionsRefusesAtAccept(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		p, _, addr := startProxyOn(t, plain, echoBackend(t))
		o := *p.opts.Load()
		o.MaxConnections = 2
		p.SetOptions(o)
		echo := func(c net.Conn) error {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("ping")); err != nil {
				return err
			}
			buf := make([]byte, 4)
			_, err := io.ReadFull(c, buf)
			return err
		}
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for range 2 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			if err := echo(c); err != nil {
				t.Fatalf("within the cap: %v", err)
			}
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := echo(c); err == nil {
			t.Error("a third connection was served with max_connections = 2")
		}
		c.Close()
		if p.Open() != 2 {
			t.Errorf("%d open after the refusal, want 2", p.Open())
		}
		held[0].Close()
		held = held[1:]
		for p.Open() > 1 {
			time.Sleep(5 * time.Millisecond)
		}
		c, err = net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if err := echo(c); err != nil {
			t.Errorf("a slot freed, the next client: %v", err)
		}
	})
}

// TestSharedCapCountsEveryPort: proxies sharing a counter (one daemon's
// ports) are held to one cap together.
func TestSharedCapCountsEveryPort(t *testing.T) {
	var open atomic.Int64
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var addrs []string
	for range 2 {
		p, _, addr := startProxy(t, echoBackend(t))
		p.StopAccepting() // started unshared by startProxy: restart shared
		p2 := New(p.pool, *p.opts.Load(), testCounters(), p.log)
		o := *p2.opts.Load()
		o.MaxConnections = 2
		p2.SetOptions(o)
		p2.ShareCap(&open)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := p2.Start([]net.Listener{ln}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p2.StopAccepting(); p2.Close() })
		addrs = append(addrs, addr)
	}
	served := func(addr string) bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return false
		}
		_, err = io.ReadFull(c, make([]byte, 4))
		return err == nil
	}
	if !served(addrs[0]) || !served(addrs[1]) {
		t.Fatal("within the shared cap: not served")
	}
	if served(addrs[0]) || served(addrs[1]) {
		t.Error("a third connection was served on either port with max_connections = 2 shared")
	}
	if open.Load() != 2 {
		t.Errorf("shared count %d, want 2", open.Load())
	}
}
