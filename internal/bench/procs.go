package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// procs tracks every process the bench starts so that all of them are
// killed at the end, also on failure or on a signal: each runs in its own
// process group (nginx's worker dies with its master) and gets SIGKILL if
// the bench itself dies.
type procs struct {
	mu   sync.Mutex
	list []*exec.Cmd
}

// start runs cmd in its own process group with stdout and stderr appended
// to logPath.
func (p *procs) start(cmd *exec.Cmd, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log %s: %w", logPath, err)
	}
	defer logf.Close() // the child holds its own copy
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logf
	}
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p.mu.Lock()
	p.list = append(p.list, cmd)
	p.mu.Unlock()
	return nil
}

// isolate puts cmd in its own process group, killed when the bench dies
// and, for a command made with exec.CommandContext, as a group on cancel.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cmd.Cancel != nil {
		cmd.Cancel = func() error { return killGroup(cmd) }
		cmd.WaitDelay = 5 * time.Second
	}
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// kill stops one process group and reaps it.
func (p *procs) kill(cmd *exec.Cmd) {
	killGroup(cmd)
	cmd.Wait()
	p.forget(cmd)
}

// stop sends sig to the process, gives it grace to exit, then kills its group.
func (p *procs) stop(cmd *exec.Cmd, sig os.Signal, grace time.Duration) {
	cmd.Process.Signal(sig)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(grace):
		killGroup(cmd)
		<-exited
	}
	p.forget(cmd)
}

func (p *procs) forget(cmd *exec.Cmd) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.list {
		if c == cmd {
			p.list = append(p.list[:i], p.list[i+1:]...)
			break
		}
	}
}

// killAll stops everything still running.
func (p *procs) killAll() {
	p.mu.Lock()
	list := p.list
	p.list = nil
	p.mu.Unlock()
	for _, cmd := range list {
		killGroup(cmd)
	}
	for _, cmd := range list {
		cmd.Wait()
	}
}

// pinned returns a command run under taskset on cpus ("" means unpinned)
// and at the bench's nice level; both exec the program in place, so the
// pid is the program's own.
func (r *runner) pinned(cpus, name string, args ...string) *exec.Cmd {
	argv := append([]string{name}, args...)
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	if r.opt.Nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(r.opt.Nice)}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// freePorts reserves n loopback ports by binding them all at once, then
// frees them for the processes the bench starts.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitServing polls until a full round trip through addr works (a byte
// from a backend comes back), for at most limit.
func waitServing(ctx context.Context, addr string, limit time.Duration) error {
	c := &client{spec: loadSpec{Targets: []string{addr}}}
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, last = c.oneShot(ctx); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not serving after %s: %v", addr, limit, last)
}
