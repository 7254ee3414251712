// Package rtnl is the route-netlink client vipproxy manages its links and
// addresses with: links by name and index, a dummy link added, deleted and
// set up, IPv6 address generation turned off, and the address list,
// replace and delete. It is what vipproxy needs of rtnetlink and nothing
// more: github.com/vishvananda/netlink, which knows every link type, cost
// the binary 0.2 MB (docs/operations.md). The tests keep that library as
// the oracle this package is checked against.
//
// A Handle is one NETLINK_ROUTE socket, bound to the network namespace it
// was opened in; its requests are serialized (one in flight at a time).
package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLinkNotFound is returned (wrapped) when no link has the name or index.
var ErrLinkNotFound = errors.New("link not found")

// replyTimeout bounds the wait for the kernel's answer: it answers at
// once, so a request that waits this long has gone wrong, and the caller
// gets an error instead of a hang.
const replyTimeout = 10 * time.Second

// Handle is a NETLINK_ROUTE socket in one network namespace.
type Handle struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte
}

// Open opens a handle in the caller's network namespace.
func Open() (*Handle, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return newHandle(fd)
}

// OpenAt opens a handle in the network namespace that the descriptor ns
// refers to (a /proc/<pid>/ns/net or /run/netns/<name> file); the socket
// stays in that namespace for its life.
func OpenAt(ns int) (*Handle, error) {
	var fd int
	err := InNetNS(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open netlink socket in namespace %d: %w", ns, err)
	}
	return newHandle(fd)
}

func newHandle(fd int) (*Handle, error) {
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set netlink socket's receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind netlink socket: %w", err)
	}
	return &Handle{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket.
func (h *Handle) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd >= 0 {
		unix.Close(h.fd)
		h.fd = -1
	}
}

// request sends one message (header added here) and returns the answers'
// messages: the parts of a dump, or none for an acknowledged change. An
// NLMSG_ERROR with a non-zero code is returned as its errno.
func (h *Handle) request(typ, flags uint16, body []byte) ([]syscall.NetlinkMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd < 0 {
		return nil, errors.New("netlink handle closed")
	}
	h.seq++
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], h.seq)
	msg = append(msg, body...)
	if err := unix.Sendto(h.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("send netlink request: %w", err)
	}
	var out []syscall.NetlinkMessage
	for {
		msgs, err := h.receive()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != h.seq {
				continue // an answer to an earlier request that gave up
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE: // may carry the dump's error
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code < 0 {
						return nil, syscall.Errno(-code)
					}
				}
				if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
					out = append(out, m) // for interrupted
				}
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("short netlink error message")
				}
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					return nil, syscall.Errno(-code)
				}
				return out, nil // the acknowledgement
			}
			out = append(out, m)
			if m.Header.Flags&unix.NLM_F_MULTI == 0 {
				return out, nil
			}
		}
	}
}

// dump asks for every object of a kind (typ: RTM_GETLINK, RTM_GETADDR)
// and parses each answer of type want.
func dump[T any](h *Handle, typ uint16, body []byte, want uint16, parse func(*syscall.NetlinkMessage) (T, error)) ([]T, error) {
	msgs, err := h.request(typ, unix.NLM_F_DUMP, body)
	// A dump that the namespace changed under is marked interrupted and
	// may lack entries: asked again, a few times.
	for try := 1; err == nil && interrupted(msgs) && try < dumpTries; try++ {
		msgs, err = h.request(typ, unix.NLM_F_DUMP, body)
	}
	if err != nil {
		return nil, err
	}
	if interrupted(msgs) {
		return nil, fmt.Errorf("the links or addresses changed during each of %d dumps", dumpTries)
	}
	var out []T
	for i := range msgs {
		if msgs[i].Header.Type != want {
			continue
		}
		v, err := parse(&msgs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

const dumpTries = 3

func interrupted(msgs []syscall.NetlinkMessage) bool {
	for _, m := range msgs {
		if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
			return true
		}
	}
	return false
}

// receive reads one datagram of messages.
func (h *Handle) receive() ([]syscall.NetlinkMessage, error) {
	for {
		n, _, flags, _, err := unix.Recvmsg(h.fd, h.buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("receive netlink answer: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			// The kernel sends dumps in datagrams of at most 32 KiB.
			return nil, fmt.Errorf("receive netlink answer: more than %d bytes", len(h.buf))
		}
		// A copy: a dump's later datagrams reuse h.buf, and the messages
		// of this one are kept until the dump ends.
		msgs, err := syscall.ParseNetlinkMessage(append([]byte(nil), h.buf[:n]...))
		if err != nil {
			return nil, fmt.Errorf("parse netlink answer: %w", err)
		}
		return msgs, nil
	}
}

// attrs builds route attributes: each type with its value, padded to 4.
type attrs []byte

func (a attrs) add(typ uint16, value []byte) attrs {
	n := unix.SizeofRtAttr + len(value)
	hdr := make([]byte, unix.SizeofRtAttr)
	binary.NativeEndian.PutUint16(hdr[0:], uint16(n))
	binary.NativeEndian.PutUint16(hdr[2:], typ)
	a = append(a, hdr...)
	a = append(a, value...)
	for len(a)%unix.NLMSG_ALIGNTO != 0 {
		a = append(a, 0)
	}
	return a
}

// InNetNS runs fn on a thread in the network namespace ns. The thread
// goes back to its own namespace after; if it cannot, it is never reused
// (the goroutine ends locked to it, so the runtime ends the thread).
func InNetNS(ns int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		done <- inNetNS(ns, fn)
	}()
	return <-done
}

func inNetNS(ns int, fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace: %w", err)
	}
	fnErr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		return errors.Join(fnErr, fmt.Errorf("return to this thread's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}
