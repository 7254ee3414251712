package engine

import (
	"os"
	"os/signal"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The relay's writes are sends with MSG_NOSIGNAL: a socket that can send
// no more (a peer gone, our own FIN sent) answers EPIPE, and the process
// gets no SIGPIPE to handle (write(2) raises one).
func TestWriteToAClosedSocketRaisesNoSIGPIPE(t *testing.T) {
	fds := nonBlockingPair(t)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGPIPE)
	defer signal.Stop(sigs)
	if err := unix.Shutdown(fds[0], unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if _, err := rawWrite(fds[0], []byte("after the FIN")); err != unix.EPIPE {
		t.Fatalf("write after shutdown: %v, want EPIPE", err)
	}
	// A signal is sent before the system call returns; Notify passes it
	// on through a goroutine of the runtime.
	select {
	case s := <-sigs:
		t.Fatalf("the write raised %v", s)
	case <-time.After(500 * time.Millisecond):
	}
}

// The relay's reads are recvs: they read a socket as read(2) does, the
// end of stream included.
func TestRawReadReadsAndSeesTheEnd(t *testing.T) {
	fds := nonBlockingPair(t)
	buf := make([]byte, 16)
	if _, err := rawRead(fds[1], buf); err != unix.EAGAIN {
		t.Fatalf("read of an empty socket: %v, want EAGAIN", err)
	}
	if _, err := rawWrite(fds[0], []byte("event")); err != nil {
		t.Fatal(err)
	}
	unix.Shutdown(fds[0], unix.SHUT_WR)
	if n, err := rawRead(fds[1], buf); err != nil || string(buf[:n]) != "event" {
		t.Fatalf("read %q, %v; want \"event\"", buf[:n], err)
	}
	if n, err := rawRead(fds[1], buf); n != 0 || err != nil {
		t.Fatalf("read at the end: %d, %v; want 0, nil", n, err)
	}
}

// nonBlockingPair is a connected pair of non-blocking stream sockets,
// closed when the test ends.
func nonBlockingPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds
}
