package mk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runner stands in for vm-tests/run.sh (one architecture's VM runs) with
// its contract: each script's output in ARCH-run/NAME.out, the failed
// scripts' names in ARCH-run/failed, a failed exit if any failed. A script
// named fail.py fails; hang.py records the runner's pid and sleeps.
// amd64 waits (bounded) for arm64 to start and says whether it saw it:
// that only happens if the two lanes run side by side.
const runner = `#!/bin/bash
arch=$1; shift
dir=$VM_WORK/$arch-run; mkdir -p "$dir"; : > "$dir/failed"
touch "$MARKS/$arch.started"
if [ "$arch" = amd64 ]; then
	for i in $(seq 200); do [ -e "$MARKS/arm64.started" ] && break; sleep 0.05; done
	[ -e "$MARKS/arm64.started" ] && echo "amd64 saw arm64 running" || echo "amd64 ran alone"
fi
if [ "$arch" = riscv64 ] && [ ! -e "$MARKS/arm64.done" ]; then echo "riscv64 started before arm64 ended"; fi
rc=0
for s; do
	name=$(basename "$s" .py)
	case $name in
	fail) { echo "$arch: step 3 went wrong"; echo "FAIL: $arch the reason"; } > "$dir/$name.out"; echo "$name" >> "$dir/failed"; rc=1 ;;
	hang) echo $$ > "$MARKS/$arch.pid"; sleep 60 ;;
	*) echo "$arch $name PASS" > "$dir/$name.out" ;;
	esac
	cat "$dir/$name.out"
done
touch "$MARKS/$arch.done"
exit $rc
`

type vmCI struct {
	work, marks string
	env         []string
}

func newVMCI(t *testing.T, amd64Extra string) vmCI {
	t.Helper()
	dir := t.TempDir()
	c := vmCI{work: filepath.Join(dir, "work"), marks: filepath.Join(dir, "marks")}
	for _, d := range []string{c.work, c.marks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(run, []byte(runner), 0o755); err != nil {
		t.Fatal(err)
	}
	c.env = append(os.Environ(), "VM_CI_RUN="+run, "VM_CI_WORK="+c.work, "MARKS="+c.marks,
		"VM_SCRIPTS=vm-tests/smoke.py", "VM_CI_AMD64_EXTRA="+amd64Extra, "VM_LOCKED=")
	return c
}

func (c vmCI) command(ctx context.Context, lanes ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "../vm-tests/ci.sh", lanes...)
	cmd.Env = c.env
	return cmd
}

// make test's VM runs go in two lanes side by side (amd64 beside arm64
// then riscv64), and a failure is named again at the very end of the
// output, with the end of the failed script's own output: a CI log is
// read from its tail (stop 28's log did not say what had failed).
func TestVMCILanesRunSideBySideAndRecapFailures(t *testing.T) {
	c := newVMCI(t, "vm-tests/fail.py")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.command(ctx, "amd64", "arm64 riscv64").CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("ci.sh passed with amd64's fail.py failing:\n%s", text)
	}
	for _, want := range []string{"[amd64] amd64 saw arm64 running", "[arm64] arm64 smoke PASS", "[riscv64] riscv64 smoke PASS"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "riscv64 started before arm64 ended") {
		t.Errorf("a lane's architectures did not run one after another:\n%s", text)
	}
	recap := text[strings.LastIndex(text, "vm-test-ci: recap"):]
	for _, want := range []string{"vm-test-ci: FAILED: amd64", "[amd64] amd64: step 3 went wrong", "[amd64] FAIL: amd64 the reason",
		"vm-test-ci: PASS: arm64", "vm-test-ci: PASS: riscv64"} {
		if !strings.Contains(recap, want) {
			t.Errorf("the recap at the end lacks %q:\n%s", want, recap)
		}
	}
}

func TestVMCIPassesWhenEveryArchitecturePasses(t *testing.T) {
	c := newVMCI(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.command(ctx, "amd64", "arm64 riscv64").CombinedOutput()
	if err != nil {
		t.Fatalf("ci.sh: %v:\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); lines[len(lines)-1] != "vm-test-ci: PASS: amd64 arm64 riscv64" {
		t.Fatalf("last line %q, want the PASS of all three:\n%s", lines[len(lines)-1], out)
	}
}

// An interrupted make test (CI's timeout, ^C) stops both lanes' runs.
func TestVMCIInterruptStopsBothLanes(t *testing.T) {
	c := newVMCI(t, "")
	c.env = append(c.env, "VM_SCRIPTS=vm-tests/hang.py")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.command(ctx, "amd64", "arm64")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := make([]int, 0, 2)
	defer func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	for _, arch := range []string{"amd64", "arm64"} {
		pid, err := waitForPID(ctx, filepath.Join(c.marks, arch+".pid"))
		if err != nil {
			t.Fatalf("%s's run never started: %v", arch, err)
		}
		pids = append(pids, pid)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("ci.sh ended well after a TERM")
	}
	if ctx.Err() != nil {
		t.Fatal("ci.sh did not end within 60 s of a TERM")
	}
	for i, pid := range pids {
		if !gone(ctx, pid) {
			t.Errorf("lane %d's run (pid %d) still runs after ci.sh ended", i+1, pid)
		}
	}
}

// waitForPID reads the pid a runner records once it is running.
func waitForPID(ctx context.Context, file string) (int, error) {
	for {
		pid, err := recordedPID(file)
		if err == nil {
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// gone reports whether pid has ended (a killed child may take a moment to
// be reaped by its parent).
func gone(ctx context.Context, pid int) bool {
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}
