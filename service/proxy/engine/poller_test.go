package engine

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/balance"
)

// socketPair is a connected pair: a fileConn of the proxy's kind on one
// end, the peer's raw descriptor on the other (closed when the test ends).
func socketPair(t *testing.T) (*FileConn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	return NewFileConn(fds[0], netip.AddrPort{}), fds[1]
}

// peerSeesClose reports whether the peer of a socket pair reads the end
// of stream: every reference to the other end is gone.
func peerSeesClose(t *testing.T, peer int) bool {
	t.Helper()
	for range 500 {
		n, err := unix.Read(peer, make([]byte, 16))
		if n == 0 && err == nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestCloseWaitsForTheLastUse: the descriptor stays open, and its number
// taken, while a call uses it, and is closed by the last one: a Close
// that closed it at once would let a new socket take the number and
// receive bytes meant for the old one.
func TestCloseWaitsForTheLastUse(t *testing.T) {
	c, peer := socketPair(t)
	want := testutil.Inode(t, c.fd)
	inUse, release := make(chan struct{}), make(chan struct{})
	var wrong error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.rawConn().Control(func(fd uintptr) {
			close(inUse)
			<-release
			var st unix.Stat_t
			if err := unix.Fstat(int(fd), &st); err != nil || st.Ino != want {
				wrong = fmt.Errorf("descriptor %d after Close: inode %d, %v; want %d", fd, st.Ino, err, want)
			}
		})
	}()
	<-inUse
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a second Close: %v, want %v", err, os.ErrClosed)
	}
	if err := c.rawConn().Control(func(uintptr) { t.Error("Control ran after Close") }); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Control after Close: %v, want %v", err, os.ErrClosed)
	}
	if n, _ := unix.Read(peer, make([]byte, 1)); n == 0 {
		t.Fatal("closed while a call used it")
	}
	close(release)
	wg.Wait()
	if wrong != nil {
		t.Fatal(wrong)
	}
	if !peerSeesClose(t, peer) {
		t.Fatal("not closed after the last use")
	}
}

// TestCloseWakesAWaitingRead: a goroutine waiting on a socket (promoted
// to Go's poller) returns when the socket is closed, and the descriptor
// and its duplicate are then both gone.
func TestCloseWakesAWaitingRead(t *testing.T) {
	c, peer := socketPair(t)
	got := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		got <- err
	}()
	testutil.WaitFor(t, "a read with nothing to read to wait in Go's poller", func() bool { return c.promoted() })
	c.Close()
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the waiting read returned no error after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting read did not return after Close")
	}
	if !peerSeesClose(t, peer) {
		t.Fatal("a descriptor of the socket is still open after Close")
	}
}

// TestWaitWithoutDescriptorsIsALocalFault: a goroutine that must wait
// on a socket when no descriptor is left for the duplicate (EMFILE) gets
// an error that balance.LocalFault knows: the relay then ends the
// connection without blaming, or replaying away from, its backend.
func TestWaitWithoutDescriptorsIsALocalFault(t *testing.T) {
	c, _ := socketPair(t)
	defer c.Close()
	var orig unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	lowered := orig
	lowered.Cur = uint64(c.fd) + 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skipf("cannot lower the descriptor limit: %v", err)
	}
	var fillers []int
	defer func() {
		for _, fd := range fillers {
			unix.Close(fd)
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &orig)
	}()
	for range lowered.Cur {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break // EMFILE: every number under the limit is taken
		}
		fillers = append(fillers, fd)
	}
	_, err := c.Read(make([]byte, 16))
	if !balance.LocalFault(err) || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("a read that must wait without a descriptor to wait with: %v, want EMFILE, a local fault", err)
	}
}

// TestReadAndWriteThroughPromotion: bytes go both ways through a fileConn
// whose waits go through Go's poller (a write bigger than the socket
// buffer, a read before the data), and the end of stream reads as io.EOF.
func TestReadAndWriteThroughPromotion(t *testing.T) {
	c, peer := socketPair(t)
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i)
	}
	done := make(chan error, 1)
	go func() {
		got, err := readPeer(peer, len(big))
		if err == nil && string(got) != string(big) {
			err = errors.New("the bytes differ")
		}
		if err == nil {
			_, err = unix.Write(peer, []byte("answer"))
		}
		done <- err
	}()
	if n, err := c.Write(big); err != nil || n != len(big) {
		t.Fatalf("write: %d, %v; want %d", n, err, len(big))
	}
	if err := <-done; err != nil {
		t.Fatalf("the peer: %v", err)
	}
	buf := make([]byte, len("answer"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "answer" {
		t.Fatalf("read: %q, %v", buf, err)
	}
	unix.Shutdown(peer, unix.SHUT_WR)
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("at the end of stream: %d, %v; want 0, io.EOF", n, err)
	}
	c.Close()
}

// readPeer reads n bytes from the non-blocking peer of a socket pair
// (bounded: 10 s).
func readPeer(peer, n int) ([]byte, error) {
	got := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	for deadline := time.Now().Add(10 * time.Second); len(got) < n; {
		m, err := unix.Read(peer, buf[:min(len(buf), n-len(got))])
		switch {
		case err == unix.EAGAIN && time.Now().Before(deadline):
			time.Sleep(time.Millisecond)
		case err != nil:
			return got, err
		case m == 0:
			return got, io.ErrUnexpectedEOF
		default:
			got = append(got, buf[:m]...)
		}
	}
	return got, nil
}

// TestConnectInProgressWaitsInTheParker: a dial whose connect is still
// in progress after its first check (every dial on a real network) waits
// in a parker's epoll, not in Go's poller, and leaves that epoll once
// connected; without a parker it waits in Go's poller and leaves it too.
// A socket that waited in Go's poller and stayed there would cost its
// connection a third descriptor and a close that wakes sysmon.
func TestConnectInProgressWaitsInTheParker(t *testing.T) {
	for _, withParker := range []bool{true, false} {
		t.Run(map[bool]string{true: "parker", false: "poller"}[withParker], func(t *testing.T) {
			var pk *parker
			if withParker {
				var err error
				if pk, err = newParker(); err != nil {
					t.Skipf("no epoll: %v", err)
				}
				defer pk.close()
			}
			addr, release := testutil.FullListener(t, testutil.Silent)
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			before := testutil.EpollTargets(t)
			type result struct {
				c   *FileConn
				err error
			}
			got := make(chan result, 1)
			go func() {
				c, err := dialAddr(ap, nil, 10*time.Second, pk)
				got <- result{c, err}
			}()
			// The SYN is dropped (the accept queue is full) and sent again
			// after 1 s: meanwhile the connect is in progress.
			testutil.WaitFor(t, "an epoll of ours to watch the connect in progress", func() bool { return len(newTargets(t, before)) > 0 })
			want := "Go's poller"
			if pk != nil {
				want = fmt.Sprintf("the parker's epoll %d", pk.epfd)
			}
			for ino, in := range newTargets(t, before) {
				if len(in) != 1 || (pk != nil && in[0] != pk.epfd) {
					t.Errorf("a socket (inode %d) whose connect is in progress is watched by the epolls %v, want %s alone", ino, in, want)
				}
			}
			release()
			var r result
			select {
			case r = <-got:
			case <-time.After(15 * time.Second):
				t.Fatal("the dial did not end")
			}
			if r.err != nil {
				t.Fatalf("dial: %v", r.err)
			}
			defer r.c.Close()
			if in := testutil.EpollTargets(t)[testutil.Inode(t, r.c.fd)]; len(in) > 0 || r.c.promoted() {
				t.Errorf("after the connect: watched by the epolls %v, promoted to Go's poller: %v; want neither", in, r.c.promoted())
			}
			if _, err := r.c.Write([]byte("x")); err != nil {
				t.Errorf("write after the dial: %v", err)
			}
		})
	}
}

// newTargets are the files some epoll of this process watches now that
// none watched before.
func newTargets(t *testing.T, before map[uint64][]int) map[uint64][]int {
	t.Helper()
	out := map[uint64][]int{}
	for ino, in := range testutil.EpollTargets(t) {
		if _, ok := before[ino]; !ok {
			out[ino] = in
		}
	}
	return out
}

// TestConnectOutlivesItsParker: a dial waiting in a parker that closes
// (the proxy shutting down) goes on waiting in Go's poller and connects,
// instead of waiting for an event that the closed epoll cannot give.
func TestConnectOutlivesItsParker(t *testing.T) {
	pk, err := newParker()
	if err != nil {
		t.Skipf("no epoll: %v", err)
	}
	addr, release := testutil.FullListener(t, testutil.Silent)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		c, err := dialAddr(ap, nil, 10*time.Second, pk)
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	testutil.WaitFor(t, "the connect in progress to wait in the parker", func() bool { pk.mu.Lock(); defer pk.mu.Unlock(); return len(pk.connecting) == 1 })
	pk.close()
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("dial after its parker closed: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the dial did not end when its parker closed and the backend accepted")
	}
}
