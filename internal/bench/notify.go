package bench

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// alive reports whether pid runs and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	f, err := statFields(pid)
	return err == nil && f[0] != "Z"
}

// readNotify reads sd_notify datagrams until one carries READY=1, the
// deadline passes or exited closes.
func readNotify(sock *net.UnixConn, deadline time.Time, exited <-chan struct{}) error {
	buf := make([]byte, 4096)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("process exited before READY=1")
		default:
		}
		sock.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := sock.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("read notify socket: %w", err)
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line == "READY=1" {
				return nil
			}
		}
	}
	return errors.New("no READY=1 within 10s")
}
