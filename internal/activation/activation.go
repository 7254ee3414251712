// Package activation is tooling for the tests and the bench: it opens a
// listening socket the way systemd does for a .socket unit and hands it to
// a command the way systemd's socket activation does (sd_listen_fds(3)).
package activation

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// Socket listens on 127.0.0.1:port (0: a free port) as systemd does for
// vipproxy.socket: plain TCP (Go's listeners default to MPTCP), backlog
// SOMAXCONN. The file is the socket to pass on; its holder keeps it open,
// as systemd does, across restarts of the commands it is passed to.
func Socket(ctx context.Context, port int) (*os.File, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, "tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("activation socket: %w", err)
	}
	defer ln.Close() // the file is a duplicate that keeps the socket
	return ln.(*net.TCPListener).File()
}

// Pass sets cmd up to get f as systemd passes a socket: as fd 3, with
// LISTEN_FDS=1, LISTEN_FDNAMES=name (the unit's FileDescriptorName=) and
// LISTEN_PID the pid of the program itself: a shell sets it to its own $$,
// then execs cmd in place (as nice and taskset do too). The variables are
// appended to cmd.Env: set it first (nil would pass on nothing else).
func Pass(cmd *exec.Cmd, f *os.File, name string) {
	PassFiles(cmd, []*os.File{f}, []string{name})
}

// PassFiles is Pass for several descriptors, as systemd passes a
// socket unit's together with what the service's file descriptor store
// holds: files[i] as fd 3+i, named names[i] in LISTEN_FDNAMES.
func PassFiles(cmd *exec.Cmd, files []*os.File, names []string) {
	argv := append([]string{"sh", "-c", `export LISTEN_PID=$$; exec "$@"`, "sh"}, cmd.Args...)
	cmd.Path, cmd.Args, cmd.Err = "/bin/sh", argv, nil
	cmd.ExtraFiles = files
	cmd.Env = append(cmd.Env, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
}
