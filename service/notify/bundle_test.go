package notify_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/notify"
)

// A bundle carries a full load of connected sockets, each with its name,
// in order; unpacked, each is the same connection (bytes written on one
// end arrive at its peer), and each is still non-blocking: bundling must
// not change the flags of the file both daemons share. While packed, the
// bundle reports neither POLLHUP nor POLLERR, on which systemd would
// drop it from its store.
func TestBundleRoundTrip(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var names []string
	var files []*os.File
	var peers []net.Conn
	for i := range notify.BundleMax {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		f, err := c.(*net.TCPConn).File() // a duplicate; c is closed below
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.SetNonblock(rawFD(t, f), true); err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprintf("pair.%d.c.vip.cp%d.10.0.0.%d", i, i%3, i%250))
		files = append(files, f)
		peers = append(peers, peer)
	}
	bundle, err := notify.Bundle(names, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close() // the bundle holds its own
	}
	fds := []unix.PollFd{{Fd: int32(rawFD(t, bundle))}}
	if n, err := unix.Poll(fds, 0); err != nil || n != 0 {
		t.Errorf("the bundle polls %#x (%d, %v): systemd would drop it from the store", fds[0].Revents, n, err)
	}

	got, err := notify.Unbundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(names) {
		t.Fatalf("unbundled %d sockets, want %d", len(got), len(names))
	}
	for i, f := range got {
		if f.Name() != names[i] {
			t.Fatalf("socket %d is named %q, want %q", i, f.Name(), names[i])
		}
		fl, err := unix.FcntlInt(uintptr(rawFD(t, f)), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Errorf("socket %d: flags %#x, %v; want it non-blocking as bundled", i, fl, err)
		}
		msg := fmt.Sprintf("to %d", i)
		if _, err := unix.Write(rawFD(t, f), []byte(msg)); err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		buf := make([]byte, 32)
		peers[i].SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := peers[i].Read(buf)
		if string(buf[:n]) != msg {
			t.Fatalf("socket %d's peer read %q, %v; want %q: not the same connection", i, buf[:n], err, msg)
		}
		f.Close()
	}
}

// What a bundle cannot carry is refused before anything is sent: more
// than one message of descriptors, a name with a newline (the names are
// the message, one a line), a name for each descriptor.
func TestBundleRefuses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	many := make([]*os.File, notify.BundleMax+1)
	manyNames := make([]string, len(many))
	for i := range many {
		many[i], manyNames[i] = r, "x"
	}
	for what, c := range map[string]struct {
		names []string
		files []*os.File
	}{
		"none":          {nil, nil},
		"too many":      {manyNames, many},
		"newline":       {[]string{"a\nb"}, []*os.File{r}},
		"empty name":    {[]string{""}, []*os.File{r}},
		"long name":     {[]string{strings.Repeat("n", 256)}, []*os.File{r}},
		"names missing": {[]string{"a"}, []*os.File{r, w}},
	} {
		if b, err := notify.Bundle(c.names, c.files); err == nil {
			b.Close()
			t.Errorf("%s: bundled", what)
		}
	}
}

// rawFD is f's descriptor; not f.Fd(), which makes it blocking.
func rawFD(t *testing.T, f *os.File) int {
	t.Helper()
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	raw.Control(func(d uintptr) { fd = int(d) })
	return fd
}
