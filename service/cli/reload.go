package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
)

// runReload is systemd's ExecReload= (and an operator's): it validates the
// file, signals the daemon (SIGHUP), waits until the daemon has taken the
// reload, and exits 1 when the daemon refused the file (the running config
// keeps serving), 2 when the file is invalid (the daemon is not signalled),
// 0 when the new config serves. `kill -HUP` alone reports success either way.
func runReload(ctx context.Context, env Env, args []string) int {
	var path, control, addr, pidText string
	fs := newFlags(env, "reload", &path)
	fs.StringVar(&pidText, "pid", "", "the daemon's pid (ExecReload=: $MAINPID)")
	fs.StringVar(&control, "control", admin.DefaultControlPath(), "the daemon's control socket")
	fs.StringVar(&addr, "admin", "", adminFlagHelp)
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the daemon to take the reload")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		fmt.Fprintf(env.Stderr, "vipproxy reload: --pid %q is not a process id (under systemd: --pid $MAINPID)\n", pidText)
		return ExitUsage
	}
	if _, ok := loadConfig(env, path); !ok {
		fmt.Fprintln(env.Stderr, "vipproxy reload: the file is refused; the daemon was not signalled and keeps its config")
		return ExitUsage
	}
	before, err := daemonStatus(ctx, path, addr, control)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy reload: cannot read the daemon's status before signalling it: %v\n", err)
		return ExitFailure
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy reload: signal pid %d: %v\n", pid, err)
		return ExitFailure
	}
	after, err := waitReloaded(ctx, path, addr, control, before.Reloads, *timeout)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy reload: %v\n", err)
		return ExitFailure
	}
	if after.ConfigError != "" {
		fmt.Fprintf(env.Stderr, "vipproxy reload: the daemon refused the new config and keeps serving the old one: %s\n", after.ConfigError)
		return ExitFailure
	}
	fmt.Fprintf(env.Stdout, "reloaded: %s backends healthy\n", after.Summary())
	return ExitOK
}

// waitReloaded polls /status every 100 ms until the reload count moves
// past before, at most timeout.
func waitReloaded(ctx context.Context, path, addr, control string, before uint64, timeout time.Duration) (admin.Status, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, err := daemonStatus(ctx, path, addr, control)
		if err == nil && st.Reloads > before {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return admin.Status{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return admin.Status{}, fmt.Errorf("the daemon did not report the reload within %s", timeout)
}

// daemonStatus reads the daemon's /status.
func daemonStatus(ctx context.Context, path, addr, control string) (admin.Status, error) {
	body, code, err := askDaemon(ctx, path, addr, []string{control}, "/status", 5*time.Second)
	if err != nil {
		return admin.Status{}, err
	}
	if code != 200 {
		return admin.Status{}, fmt.Errorf("/status answered %d", code)
	}
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return admin.Status{}, fmt.Errorf("/status: %w", err)
	}
	return st, nil
}
