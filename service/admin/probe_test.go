package admin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// serveProbe runs ServeProbe on a new probe socket in a directory of the
// test until it ends, and returns the socket's path.
func serveProbe(t *testing.T, src Source) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), ProbeSocketName)
	ln, err := ListenUnix(sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ServeProbe(ctx, ln, src, slog.New(slog.DiscardHandler)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// The probe socket answers as it accepts, with nothing asked: a client
// that sends nothing gets readiness all the same, and holds nothing.
func TestProbeSocketAnswersAtAccept(t *testing.T) {
	src := &fakeSource{}
	src.set(Status{Ready: true, Backends: backends("up", "down")})
	sock := serveProbe(t, src)
	idle := make([]net.Conn, 0, 64)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 64 { // more than the HTTP server's MaxConns
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d, sending nothing: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(body) != "ready: 1/2 backends healthy\n" {
			t.Fatalf("connection %d: %d %q %v", i, resp.StatusCode, body, err)
		}
	}
	src.set(Status{Ready: true, Backends: backends("down")})
	if line := testutil.UnixFirstLine(t, sock); line != "HTTP/1.1 503 Service Unavailable\r\n" {
		t.Errorf("not ready: %q", line)
	}
}

// DialDaemon takes the socket's directory owner for the daemon only where
// no one else could have made the directory, and the peer for the daemon
// only when its credentials name that owner or root.
func TestDialDaemonTrust(t *testing.T) {
	src := &fakeSource{}
	src.set(Status{Ready: true, Backends: backends("up")})
	sock := serveProbe(t, src)
	c, err := DialDaemon(context.Background(), sock)
	if err != nil {
		t.Fatalf("the test's own socket in its own directory: %v", err)
	}
	c.Close()

	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil { // writable by all, not sticky
		t.Fatal(err)
	}
	below := filepath.Join(open, "run")
	if err := os.Mkdir(below, 0o711); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(below, "probe.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := DialDaemon(context.Background(), filepath.Join(below, "probe.sock")); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a socket below a directory anyone may write to: %v", err)
	}
	if _, err := DialDaemon(context.Background(), filepath.Join(t.TempDir(), "absent.sock")); err == nil {
		t.Error("no socket: no error")
	}
}

// A flood can fill the probe socket's listen queue for a moment; a unix
// connect then fails at once with EAGAIN. DialDaemon tries again until
// its deadline rather than take that for a dead daemon.
func TestDialDaemonWaitsForAFullListenQueue(t *testing.T) {
	sock := filepath.Join(t.TempDir(), ProbeSocketName)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), sock)
	defer f.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil { // one connection waits, no more
		t.Fatal(err)
	}
	var queued []net.Conn
	defer func() {
		for _, c := range queued {
			c.Close()
		}
	}()
	for range 10 { // bounded: the queue is full after one or two
		c, err := net.Dial("unix", sock)
		if err != nil {
			if !errors.Is(err, syscall.EAGAIN) {
				t.Fatal(err)
			}
			break
		}
		queued = append(queued, c)
	}
	if len(queued) == 10 {
		t.Fatal("the listen queue never filled")
	}
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	dialed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := DialDaemon(ctx, sock)
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	time.Sleep(100 * time.Millisecond) // the probe meets the full queue first
	testutil.Serve(t, ln, testutil.Silent)
	if err := <-dialed; err != nil {
		t.Errorf("DialDaemon with the listen queue full for a moment: %v", err)
	}
}
