// Package regularfile reads the small files vipproxy is pointed at (its
// config, certificates, keys, tokens, kubeconfigs, the discovery state
// file) so that a file of the wrong kind can never block the daemon.
package regularfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read reads a regular file of at most limit bytes. It opens the file
// non-blocking and refuses it after fstat unless it is a regular file
// (symbolic links are followed: kubelet's and k3s' certificates are
// links): a FIFO would block open(2) until a writer comes (the daemon
// then never listened and ignored SIGTERM), a device or /proc file may
// never end.
func Read(path string, limit int64) ([]byte, error) {
	f, st, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// Check opens path as Read does, reads nothing, and says whether it is a
// regular file; a missing file is an error that wraps os.ErrNotExist.
func Check(path string) error {
	f, _, err := open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

func open(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (%s)", path, kind(st.Mode()))
	}
	return f, st, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}
