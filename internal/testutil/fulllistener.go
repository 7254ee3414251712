package testutil

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FullListener is a loopback listener whose accept queue is full, so a
// connect to it waits (its SYN dropped, then sent again) until release
// starts accepting, serving each connection with serve.
func FullListener(t testing.TB, serve func(net.Conn)) (addr string, release func()) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "full-listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr = ln.Addr().String()
	// Fill the queue: a connect that times out found it full.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
		if i == 8 {
			t.Fatal("the accept queue of a listener with backlog 0 never filled")
		}
	}
	return addr, func() { Serve(t, ln, serve) }
}
