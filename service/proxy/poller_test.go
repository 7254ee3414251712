package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/proxy/engine"
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
	roundTrip(t, conns[0], strings.Repeat("0123456789abcdef", 64*engine.CopyBufSize/16))
	if !waitFor(func() bool { return p.relay.Parked() == 2*len(conns) }) {
		t.Fatalf("%d of %d directions parked again after bulk", p.relay.Parked(), 2*len(conns))
	}
	parkerEpolls := map[int]bool{}
	for _, fd := range p.relay.ParkerEpolls() {
		parkerEpolls[fd] = true
	}
	watched := testutil.EpollTargets(t)
	socks := ownTCPSockets(t)
	// By inode: a socket promoted to Go's poller has a second descriptor.
	proxySockets := map[uint64]string{}
	for i, c := range conns {
		fd, ok := clientSide(socks, c)
		if !ok {
			t.Fatalf("connection %d: the proxy's client socket not found", i)
		}
		proxySockets[testutil.Inode(t, fd)] = fmt.Sprintf("connection %d's client socket (descriptor %d)", i, fd)
	}
	for fd, peer := range socks {
		if peer == backend && dialed.has(localAddr(fd)) {
			proxySockets[testutil.Inode(t, fd)] = fmt.Sprintf("a backend socket (descriptor %d)", fd)
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
