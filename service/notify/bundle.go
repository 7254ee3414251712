package notify

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// BundleMax is the most descriptors one bundle carries: the kernel's
// SCM_MAX_FD (253) per message, kept even so that a pair's two sockets
// stay in one bundle.
const BundleMax = 252

// bundlePayloadMax bounds the names a bundle carries: BundleMax names
// of at most 255 characters each, and the newlines between them.
const bundlePayloadMax = BundleMax * 256

// Bundle packs named descriptors into one: a datagram socket pair whose
// receiving end holds them, with their names, as one SCM_RIGHTS message
// in its queue. That end goes into the store instead of each descriptor.
// Why: systemd compares every descriptor stored with each one it holds
// (service_add_fd_store), so storing n one by one costs it n²/2
// comparisons in PID 1: seconds for a few thousand connections, and
// 12-34 ms a connection in the TCG guests (measured 2026-12-06). A
// bundle of BundleMax costs it one.
//
// The sending end is closed at once: on a datagram socket pair that
// leaves the receiving end without POLLHUP or POLLERR, which the store
// would take for a dead descriptor and drop. The descriptors in the
// queue stay open until the bundle is unpacked or closed (then the
// kernel closes them). The caller keeps its own files.
func Bundle(names []string, files []*os.File) (*os.File, error) {
	if len(files) == 0 || len(files) > BundleMax || len(names) != len(files) {
		return nil, fmt.Errorf("bundle %d descriptors with %d names: want 1 to %d, one name each", len(files), len(names), BundleMax)
	}
	for _, n := range names {
		if n == "" || len(n) > 255 || strings.Contains(n, "\n") {
			return nil, fmt.Errorf("bundle: descriptor name %q: want 1 to 255 characters, no newline", n)
		}
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bundle: socket pair: %w", err)
	}
	bundle := os.NewFile(uintptr(fds[0]), "bundle")
	err = sendNamed(fds[1], names, files)
	syscall.Close(fds[1])
	if err != nil {
		bundle.Close()
		return nil, err
	}
	return bundle, nil
}

// sendNamed sends files as one message on the socket fd, their names in
// order as its data.
func sendNamed(fd int, names []string, files []*os.File) error {
	rights := make([]int, 0, len(files))
	for _, f := range files {
		raw, err := f.SyscallConn()
		if err != nil {
			return fmt.Errorf("bundle %s: %w", f.Name(), err)
		}
		// Control, not Fd: Fd would make the socket blocking, for the
		// next daemon too (the flag belongs to the shared file).
		raw.Control(func(fd uintptr) { rights = append(rights, int(fd)) })
	}
	if len(rights) != len(files) {
		return errors.New("bundle: a descriptor was closed")
	}
	// The files stay open until Sendmsg returns, so the numbers hold.
	if err := syscall.Sendmsg(fd, []byte(strings.Join(names, "\n")), syscall.UnixRights(rights...), nil, syscall.MSG_DONTWAIT); err != nil {
		return fmt.Errorf("bundle %d descriptors: %w", len(files), err)
	}
	return nil
}

// Unbundle takes the descriptors out of a bundle, each an *os.File named
// as it was bundled, and closes the bundle. A message cut short (more
// descriptors or names than a bundle holds) or whose names do not match
// its descriptors is an error; its descriptors are closed, and those of
// the messages before it returned.
func Unbundle(bundle *os.File) ([]*os.File, error) {
	defer bundle.Close()
	raw, err := bundle.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("unbundle %s: %w", bundle.Name(), err)
	}
	var files []*os.File
	var rerr error
	err = raw.Control(func(fd uintptr) {
		for { // one message a bundle; more are taken too, up to BundleMax descriptors each
			var got []*os.File
			got, rerr = receiveNamed(int(fd))
			if rerr != nil || got == nil {
				return
			}
			files = append(files, got...)
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return files, fmt.Errorf("unbundle %s: %w", bundle.Name(), err)
	}
	return files, nil
}

// receiveNamed reads one message of named descriptors from the socket
// fd; nil, nil when none is left.
func receiveNamed(fd int) ([]*os.File, error) {
	buf := make([]byte, bundlePayloadMax+1)
	oob := make([]byte, syscall.CmsgSpace(4*(BundleMax+1)))
	n, oobn, flags, _, err := syscall.Recvmsg(fd, buf, oob, syscall.MSG_DONTWAIT|syscall.MSG_CMSG_CLOEXEC)
	if err == syscall.EAGAIN {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	var fds []int // a bundle's message has one SCM_RIGHTS
	if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		fds, _ = syscall.ParseUnixRights(&msgs[0])
	}
	names := strings.Split(string(buf[:n]), "\n")
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || len(names) != len(fds) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, fmt.Errorf("a message of %d descriptors and %d names (flags %#x): cut short or mismatched", len(fds), len(names), flags)
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), names[i])
	}
	return files, nil
}
