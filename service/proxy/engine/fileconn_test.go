package engine

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestReadTellsAResetFromTheEnd: a FileConn's Read returns the peer's
// reset as an error (ECONNRESET), and only its FIN as io.EOF: a relay
// that took a reset for the end would pass a cut stream on as a whole one.
func TestReadTellsAResetFromTheEnd(t *testing.T) {
	for _, reset := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ap, err := netip.ParseAddrPort(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, err := dialAddr(ap, nil, 10*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		peer.Write([]byte("x"))
		if reset {
			peer.(*net.TCPConn).SetLinger(0)
		}
		peer.Close()
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		if n != 1 {
			t.Fatalf("read %d bytes, want the 1 sent before the close", n)
		}
		_, err = c.Read(buf)
		switch {
		case reset && !errors.Is(err, syscall.ECONNRESET):
			t.Errorf("after the peer's reset: %v, want ECONNRESET", err)
		case !reset && err != io.EOF:
			t.Errorf("after the peer's FIN: %v, want io.EOF", err)
		}
	}
}
