package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DialDaemon connects to the daemon's unix socket at path and returns the
// connection only when the daemon's own process holds the socket: what
// `vipproxy probe` and `vipproxy announce` need before they take an
// answer for readiness (a dead daemon is never ready, and nothing else may
// say it is).
//
// The daemon is whoever owns the socket's directory (the unit's
// RuntimeDirectory, which systemd creates for the service's user, mode
// 0711): that owner is believed only when no one else could have made or
// replaced the directory, so every directory above it belongs to root or
// to the caller and is writable by no one else (a sticky directory such as
// /tmp is allowed when the entry below it belongs to root or the caller).
// The peer's credentials (SO_PEERCRED) must then name that owner or root.
//
// The peer's pid is not compared: systemd names the unit's main PID only
// over D-Bus (too heavy for a check every second), a pid file in the
// directory could be written by anything running as the daemon's user,
// which is exactly what the uid already admits, and /proc/PID/exe of the
// daemon is unreadable to an unprivileged probe user.
func DialDaemon(ctx context.Context, path string) (*net.UnixConn, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("daemon socket %s: %w", path, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("daemon socket %s: %w", path, err)
	}
	owner, err := socketDirOwner(filepath.Dir(resolved))
	if err != nil {
		return nil, fmt.Errorf("daemon socket %s: %w", path, err)
	}
	conn, err := dialUnix(ctx, resolved)
	if err != nil {
		return nil, fmt.Errorf("daemon socket %s: %w", path, err)
	}
	cred, err := peerCred(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("daemon socket %s: peer credentials: %w", path, err)
	}
	if cred.Uid != 0 && cred.Uid != owner {
		conn.Close()
		return nil, fmt.Errorf("daemon socket %s is held by uid %d (pid %d), not by uid %d, which owns %s: not the daemon's answer",
			path, cred.Uid, cred.Pid, owner, filepath.Dir(resolved))
	}
	return conn, nil
}

// socketDirOwner is the uid owning dir (an absolute path without symlinks)
// when that ownership can be believed (see DialDaemon), else why not.
func socketDirOwner(dir string) (uint32, error) {
	euid := uint32(os.Geteuid())
	trusted := func(uid uint32) bool { return uid == 0 || uid == euid }
	var paths []string // from / down to dir
	for p := dir; ; p = filepath.Dir(p) {
		paths = append(paths, p)
		if p == "/" || p == "." {
			break
		}
	}
	slices.Reverse(paths)
	openParent := false
	var st unix.Stat_t
	for i, p := range paths {
		if err := unix.Lstat(p, &st); err != nil {
			return 0, fmt.Errorf("check %s: %w", p, err)
		}
		last := i == len(paths)-1
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return 0, fmt.Errorf("%s is not a directory", p)
		case (!last || openParent) && !trusted(st.Uid):
			return 0, fmt.Errorf("%s belongs to uid %d and lies where others could have made it: a socket below it proves nothing", p, st.Uid)
		case !last && st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return 0, fmt.Errorf("%s is writable by others (mode %o): a socket below it proves nothing", p, st.Mode&0o7777)
		}
		openParent = st.Mode&0o022 != 0
	}
	return st.Uid, nil
}

// dialUnix connects to the socket at path, trying again while its listen
// queue is full (EAGAIN: a flood of connections from another user) until
// ctx ends.
func dialUnix(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return c.(*net.UnixConn), nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (its listen queue stayed full)", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}
