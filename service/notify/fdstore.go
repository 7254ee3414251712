package notify

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// FDStore is the service manager's file descriptor store
// (FileDescriptorStoreMax= in systemd.service(5)), spoken to over
// NOTIFY_SOCKET with the descriptors as SCM_RIGHTS, as
// sd_pid_notify_with_fds(3) does. What it holds is passed to the next
// start of the service with LISTEN_FDS and LISTEN_FDNAMES, after the
// socket units' descriptors. systemd keeps it while the service restarts
// (a restart job, or Restart= after a failure) and closes it when the
// service stops; it also drops a descriptor that reports POLLHUP or
// POLLERR, a socket closed both ways.
type FDStore struct {
	conn *net.UnixConn
	max  int
}

// storeTimeout bounds each message to the store and the barrier: systemd
// reads its notify socket at once, so only a hung manager takes longer.
const storeTimeout = 10 * time.Second

// OpenFDStore connects to the service manager's notify socket, or returns
// nil and why not. The store's size comes from $FDSTORE, which systemd
// sets to FileDescriptorStoreMax= since version 254; the unit sets it for
// older ones (vipproxy.service). Without it the service cannot know that
// the store exists, and descriptors sent to a service without one are
// closed by systemd, connections cut: Max is then 0 and why says so
// (taking descriptors out, Remove, needs no size).
func OpenFDStore(getenv func(string) string) (s *FDStore, why string) {
	path := getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil, "no NOTIFY_SOCKET: not started by systemd"
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Sprintf("cannot reach NOTIFY_SOCKET %s: %v", path, err)
	}
	s = &FDStore{conn: conn}
	if s.max, err = strconv.Atoi(getenv("FDSTORE")); err != nil || s.max <= 0 {
		s.max = 0
		why = "no FDSTORE in the environment: the unit has no FileDescriptorStoreMax= (systemd < 254 also needs Environment=FDSTORE= of the same size)"
	}
	return s, why
}

// Max is the number of descriptors the store takes; 0: no store.
func (s *FDStore) Max() int { return s.max }

// Close closes the connection to the store (not what it holds).
func (s *FDStore) Close() { s.conn.Close() }

// Store puts a duplicate of f into the store under name (FDNAME=: at most
// 255 printable ASCII characters, no ':').
func (s *FDStore) Store(name string, f *os.File) error {
	if err := ValidFDName(name); err != nil {
		return err
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("store %s: %w", name, err)
	}
	var serr error
	// Control, not Fd: Fd would make the socket blocking.
	if err := raw.Control(func(fd uintptr) { serr = s.send("FDSTORE=1\nFDNAME="+name, syscall.UnixRights(int(fd))) }); err != nil {
		return fmt.Errorf("store %s: %w", name, err)
	}
	return serr
}

// Remove closes and forgets the descriptors stored under name.
func (s *FDStore) Remove(name string) error {
	return s.send("FDSTOREREMOVE=1\nFDNAME="+name, nil)
}

// Barrier waits until the service manager has handled every message sent
// before it (BARRIER=1, sd_notify_barrier(3)): it closes the pipe end
// sent along once it gets there.
func (s *FDStore) Barrier() error {
	var p [2]int
	// Non-blocking, so the read end waits in Go's poller with a deadline.
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return fmt.Errorf("barrier pipe: %w", err)
	}
	r := os.NewFile(uintptr(p[0]), "barrier")
	defer r.Close()
	err := s.send("BARRIER=1", syscall.UnixRights(p[1]))
	syscall.Close(p[1])
	if err != nil {
		return err
	}
	r.SetReadDeadline(time.Now().Add(storeTimeout))
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		return fmt.Errorf("barrier: the service manager did not answer: %v", err)
	}
	return nil
}

func (s *FDStore) send(msg string, rights []byte) error {
	// sendmsg on the connected socket: Go's WriteMsgUnix refuses a
	// connected datagram socket.
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", firstLine(msg), err)
	}
	var serr error
	s.conn.SetWriteDeadline(time.Now().Add(storeTimeout))
	err = raw.Write(func(fd uintptr) bool {
		serr = syscall.Sendmsg(int(fd), []byte(msg), rights, nil, syscall.MSG_NOSIGNAL)
		return serr != syscall.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", firstLine(msg), err)
	}
	return nil
}

func firstLine(msg string) string {
	for i := range len(msg) {
		if msg[i] == '\n' {
			return msg[:i]
		}
	}
	return msg
}

// ValidFDName checks a name as systemd does (fdname_is_valid): 1 to 255
// printable ASCII characters, none of them ':'.
func ValidFDName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("file descriptor name %q: want 1 to 255 characters", name)
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e || c == ':' {
			return fmt.Errorf("file descriptor name %q: only printable ASCII other than ':'", name)
		}
	}
	return nil
}
