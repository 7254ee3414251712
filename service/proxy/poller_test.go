package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/balance"
)

// TestParkedSocketsStayOutOfGoPoller: the sockets of a connection that
// the parker serves are watched by the parker's epoll alone, also after
// bulk had them wait in Go's poller for a while. In Go's
// poller as well, each cost two epoll_ctl calls and a close through the
// scheduler's system call state (fileConn); the kernel's list of what
// every epoll of this process watches shows where they are.
func TestParkedSocketsStayOutOfGoPoller(t *testing.T) {
	backend, dialed := recordingBackend(t)
	p, _, addr := startParking(t, backend)
	conns := openParked(t, p, addr, 3)
	// Bulk wakes both directions of one (splice, a write that waits):
	// each socket goes to Go's poller while they run, and leaves it when
	// they park again.
	roundTrip(t, conns[0], strings.Repeat("0123456789abcdef", 64*copyBufSize/16))
	if !waitFor(func() bool { return p.relay.parked() == 2*len(conns) }) {
		t.Fatalf("%d of %d directions parked again after bulk", p.relay.parked(), 2*len(conns))
	}
	parkerEpolls := map[int]bool{}
	for _, pk := range p.relay.parkers {
		parkerEpolls[pk.epfd] = true
	}
	watched := epollTargets(t)
	socks := ownTCPSockets(t)
	// By inode: a socket promoted to Go's poller has a second descriptor.
	proxySockets := map[uint64]string{}
	for i, c := range conns {
		fd, ok := clientSide(socks, c)
		if !ok {
			t.Fatalf("connection %d: the proxy's client socket not found", i)
		}
		proxySockets[inode(t, fd)] = fmt.Sprintf("connection %d's client socket (descriptor %d)", i, fd)
	}
	for fd, peer := range socks {
		if peer == backend && dialed.has(localAddr(fd)) {
			proxySockets[inode(t, fd)] = fmt.Sprintf("a backend socket (descriptor %d)", fd)
		}
	}
	if len(proxySockets) != 2*len(conns) {
		t.Fatalf("found %d of the proxy's %d sockets", len(proxySockets), 2*len(conns))
	}
	for ino, what := range proxySockets {
		in := watched[ino]
		if len(in) != 1 || !parkerEpolls[in[0]] {
			t.Errorf("%s is watched by the epolls %v, want by one parker's alone (%v)", what, in, parkerEpolls)
		}
	}
}

// epollTargets maps the inode of every file some epoll of this process
// watches to those epolls' descriptors (/proc/self/fdinfo).
func epollTargets(t *testing.T) map[uint64][]int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[uint64][]int{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, _ := os.Readlink("/proc/self/fd/" + e.Name()); link != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// tfd:        9 events:       19 data: ... pos:0 ino:2ba5 sdev:8
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "tfd:" {
				continue
			}
			for _, fl := range fields {
				if hex, ok := strings.CutPrefix(fl, "ino:"); ok {
					ino, err := strconv.ParseUint(hex, 16, 64)
					if err != nil {
						t.Fatalf("fdinfo of epoll %d: %q", fd, sc.Text())
					}
					out[ino] = append(out[ino], fd)
				}
			}
		}
		f.Close()
	}
	return out
}

func inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// socketPair is a connected pair: a fileConn of the proxy's kind on one
// end, the peer's raw descriptor on the other (closed when the test ends).
func socketPair(t *testing.T) (*fileConn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	return newFileConn(fds[0], netip.AddrPort{}), fds[1]
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
	want := inode(t, c.fd)
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
	if !waitFor(func() bool { return c.promoted() }) {
		t.Fatal("a read with nothing to read did not wait in Go's poller")
	}
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
			addr, release := fullListener(t)
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			before := epollTargets(t)
			type result struct {
				c   *fileConn
				err error
			}
			got := make(chan result, 1)
			go func() {
				c, err := dialAddr(ap, nil, 10*time.Second, pk)
				got <- result{c, err}
			}()
			// The SYN is dropped (the accept queue is full) and sent again
			// after 1 s: meanwhile the connect is in progress.
			if !waitFor(func() bool { return len(newTargets(t, before)) > 0 }) {
				t.Fatal("the connect in progress is watched by no epoll of ours")
			}
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
			if in := epollTargets(t)[inode(t, r.c.fd)]; len(in) > 0 || r.c.promoted() {
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
	for ino, in := range epollTargets(t) {
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
	addr, release := fullListener(t)
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
	if !waitFor(func() bool { pk.mu.Lock(); defer pk.mu.Unlock(); return len(pk.connecting) == 1 }) {
		t.Fatal("the connect in progress never waited in the parker")
	}
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
