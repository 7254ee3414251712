package testutil

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// FDStore stands in for systemd's file descriptor store: it is a
// NOTIFY_SOCKET that keeps the descriptors sent with FDSTORE=1 (as
// SCM_RIGHTS) under their FDNAME=, closes and forgets those named in an
// FDSTOREREMOVE=1, and answers BARRIER=1 by closing the descriptor sent
// with it, as systemd does (sd_notify(3)). Every datagram is kept too.
type FDStore struct {
	Path string
	Max  int // $FDSTORE for the service, the store's size

	conn *net.UnixConn

	mu         sync.Mutex
	stallAfter int            // stop reading once this many are held (0: never)
	stalled    chan struct{}  // closed by Unstall
	names      []string       // in the order stored
	files      map[string]int // raw: an os.File's Fd would make a socket blocking
	removed    []string
	msgs       []string
}

// NewFDStore listens on a new socket in the test's directory; what it
// holds is closed when the test ends.
func NewFDStore(t testing.TB, max int) *FDStore {
	t.Helper()
	s, err := ListenFDStore(filepath.Join(t.TempDir(), "notify.sock"), max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// ListenFDStore is NewFDStore outside a test (the bench's stand-in for
// systemd): it listens on path, which must not exist, until Close.
func ListenFDStore(path string, max int) (*FDStore, error) {
	s := &FDStore{Path: path, Max: max, files: map[string]int{}, stalled: make(chan struct{})}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("listen on the file descriptor store's socket: %w", err)
	}
	s.conn = conn
	go s.serve(conn)
	return s, nil
}

// Close stops listening and closes everything the store holds.
func (s *FDStore) Close() {
	s.Unstall()
	s.conn.Close()
	s.Flush()
}

// StallAfter makes the store stop reading its socket once it holds n
// descriptors, as a service manager that hangs: the datagrams sent after
// wait in the socket's queue, and once that is full (net.unix.max_dgram_qlen)
// the service's sends fail when their deadline passes. Unstall reads on.
func (s *FDStore) StallAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallAfter = n
}

// Unstall lets a stalled store read on (what waited in the queue too).
func (s *FDStore) Unstall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stalled:
	default:
		close(s.stalled)
	}
}

// wait blocks while the store is stalled.
func (s *FDStore) wait() {
	s.mu.Lock()
	stall := s.stallAfter > 0 && len(s.files) >= s.stallAfter
	s.mu.Unlock()
	if stall {
		<-s.stalled
	}
}

// Env is what points a service at the store: NOTIFY_SOCKET and FDSTORE.
func (s *FDStore) Env() []string {
	return []string{"NOTIFY_SOCKET=" + s.Path, "FDSTORE=" + strconv.Itoa(s.Max)}
}

func (s *FDStore) serve(conn *net.UnixConn) {
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(253*4))
	for {
		s.wait()
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		s.handle(string(buf[:n]), receivedFDs(oob[:oobn]))
	}
}

// receivedFDs are the descriptors of a datagram's SCM_RIGHTS.
func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func (s *FDStore) handle(msg string, fds []int) {
	vars := map[string]string{}
	for _, line := range strings.Split(msg, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
	switch {
	case vars["FDSTORE"] == "1" && len(fds) == 1 && len(s.files) < s.Max:
		name := vars["FDNAME"]
		if old, ok := s.files[name]; ok {
			syscall.Close(old)
		} else {
			s.names = append(s.names, name)
		}
		s.files[name] = fds[0]
		return
	case vars["FDSTOREREMOVE"] == "1":
		name := vars["FDNAME"]
		if fd, ok := s.files[name]; ok {
			syscall.Close(fd)
			delete(s.files, name)
			s.names = removeName(s.names, name)
		}
		s.removed = append(s.removed, name)
	}
	for _, fd := range fds { // a barrier's, or one the store refused
		syscall.Close(fd)
	}
}

func removeName(names []string, name string) []string {
	out := names[:0]
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// Held returns the names of the descriptors held now, in the order stored.
func (s *FDStore) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// Removed returns the names FDSTOREREMOVE=1 asked for, in order.
func (s *FDStore) Removed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.removed...)
}

// Messages returns the datagrams received so far.
func (s *FDStore) Messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

// Files returns duplicates of the descriptors held, in the order stored,
// as systemd passes them to the next start (its own copies stay in the
// store until removed), with their names.
func (s *FDStore) Files() ([]*os.File, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var files []*os.File
	var names []string
	for _, n := range s.names {
		fd, err := unix.FcntlInt(uintptr(s.files[n]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			continue
		}
		files = append(files, os.NewFile(uintptr(fd), n))
		names = append(names, n)
	}
	return files, names
}

// Flush closes everything the store holds, as systemd does when the
// service stops.
func (s *FDStore) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.names {
		syscall.Close(s.files[n])
	}
	s.names, s.files = nil, map[string]int{}
}
