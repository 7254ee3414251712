// Package mk holds the tests of the Makefile's own recipes (the files
// here are make's; this test runs the real Makefile).
package mk

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When a test target of `make test` fails, the long preparations it
// started in the background are stopped and `make test` ends, failed.
// Before, a background make whose output went through a filter it
// started itself (`> >(sed ...)`) caught the TERM, then waited for that
// filter, which waited for make's own output to end: `make test` never
// returned (2026-12-01: a fresh .ci/run hung 25 minutes after
// test-multiarch failed, with vm-images-ci's make in do_wait). And a
// recipe that takes time to end on TERM (here 3 s, then 2 s of its own
// trap) has ended when make test returns: the group's leader died at
// once and make test ended while the recipe still ran (CI, 2026-12-02:
// "the background target still runs after make test ended").
func TestFailedTestStopsTheBackground(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "background.pid")
	extra := filepath.Join(dir, "extra.mk")
	rules := "mk-test-fail:\n\t@sleep 1; echo failing; exit 1\n" +
		"mk-test-background:\n\t@echo $$$$ > " + pidFile + "; trap 'sleep 2; exit 143' TERM; echo preparing; " +
		"bash -c 'trap \"exit 143\" TERM; (trap \"\" TERM; sleep 3)'; sleep 120 & wait; echo prepared\n"
	if err := os.WriteFile(extra, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", "..", "--no-print-directory", "test",
		"TEST_TARGETS=mk-test-fail", "TEST_BACKGROUND=mk-test-background", "APT_PACKAGES=")
	// MAKEFILES: every make of the run, the background ones too, reads the
	// two rules above.
	cmd.Env = append(withoutMakeVars(os.Environ()), "MAKEFILES="+extra)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	defer killRecorded(pidFile)
	if ctx.Err() != nil {
		t.Fatalf("make test did not end within 60 s of its failed target (killed):\n%s", out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("make test after a failed target: %v, want a failed exit:\n%s", err, out)
	}
	pid, perr := recordedPID(pidFile)
	if perr != nil {
		t.Fatalf("the background target never ran: %v\n%s", perr, out)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("the background target (pid %d) still runs after make test ended:\n%s", pid, out)
	}
	if strings.Contains(string(out), "prepared") {
		t.Fatalf("the background target ran to its end, so this test showed nothing:\n%s", out)
	}
}

func withoutMakeVars(env []string) []string {
	var kept []string
	for _, e := range env {
		if !strings.HasPrefix(e, "MAKEFLAGS=") && !strings.HasPrefix(e, "MAKELEVEL=") && !strings.HasPrefix(e, "MFLAGS=") {
			kept = append(kept, e)
		}
	}
	return kept
}

func recordedPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// killRecorded ends the background target if the test left it running.
func killRecorded(file string) {
	if pid, err := recordedPID(file); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// runner stands in for vm-tests/run.sh as ci.sh calls it (one
// architecture, one script) with its contract: the script's output, a
// failed exit if it failed. It appends "start ARCH NAME" and "end ARCH
// NAME" to MARKS/events (each line written while the run runs, so the
// order of the lines bounds how many ran at once). A script named fail.py
// fails; hang.py records the runner's pid and sleeps. amd64's smoke waits
// (bounded: WAIT_STEPS of 50 ms) for another run to start after it and says
// whether it saw one: that only happens if runs go side by side. Each run
// also notes in MARKS/skip whether it was asked to leave out the steps
// that are the same on every architecture (VM_SKIP_ARCH_NEUTRAL=1).
const runner = `#!/bin/bash
arch=$1 name=$(basename "$2" .py)
echo "start $arch $name" >> "$MARKS/events"
echo "$arch $name ${VM_SKIP_ARCH_NEUTRAL-unset}" >> "$MARKS/skip"
if [ "$arch $name" = "amd64 smoke" ]; then
	before=$(grep -c ^start "$MARKS/events")
	for i in $(seq "${WAIT_STEPS:-200}"); do [ "$(grep -c ^start "$MARKS/events")" -gt "$before" ] && break; sleep 0.05; done
	[ "$(grep -c ^start "$MARKS/events")" -gt "$before" ] && echo "amd64 saw another run" || echo "amd64 ran alone"
fi
rc=0
case $name in
fail) echo "$arch: step 3 went wrong"; echo "FAIL: $arch the reason"; rc=1 ;;
hang) echo $$ > "$MARKS/$arch.pid"; sleep 60 ;;
*) sleep 0.1; echo "$arch $name PASS" ;;
esac
echo "run.sh: $arch: $name $([ $rc = 0 ] && echo PASS || echo FAIL) 0 s; image 0 s, total 0 s, exit $rc"
echo "end $arch $name" >> "$MARKS/events"
exit $rc
`

type vmCI struct {
	work, marks string
	env         []string
}

func newVMCI(t *testing.T, scripts, amd64Extra string) vmCI {
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
		"VM_SCRIPTS="+scripts, "VM_CI_AMD64_EXTRA="+amd64Extra, "VM_LOCKED=", "VM_CI_LANES=2",
		"VM_CI_ALONE="+makeDefault(t, "40-vm.mk", "VM_CI_ALONE"))
	return c
}

// makeDefault is the value FILE gives VAR with "VAR ?= value": the default
// that make test passes to ci.sh.
func makeDefault(t *testing.T, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s sets no default for %s", file, name)
	return ""
}

func (c vmCI) command(ctx context.Context, archs ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "../vm-tests/ci.sh", archs...)
	cmd.Env = c.env
	return cmd
}

// events reads the runner's start and end lines: the runs in the order
// they started, the most that ran at once, and the most scenarios that
// ran at once.
func (c vmCI) events(t *testing.T) (started []string, most, mostScenarios int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.marks, "events"))
	if err != nil {
		t.Fatal(err)
	}
	running, scenarios := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		what, run, _ := strings.Cut(line, " ")
		scenario := 0
		if strings.HasSuffix(run, " scenario") {
			scenario = 1
		}
		switch what {
		case "start":
			started = append(started, run)
			running++
			scenarios += scenario
			most = max(most, running)
			mostScenarios = max(mostScenarios, scenarios)
		case "end":
			running--
			scenarios -= scenario
		}
	}
	return started, most, mostScenarios
}

// make test's VM runs are one queue taken by two workers: every
// architecture's first script, amd64's extras, then the second...,
// two runs at a time and never more, each once, and never two scenarios
// at once (four guests each: eight starved the TCG guests until the VIP
// moved under a request loop); a failure is named again
// at the very end of the output, with the end of the failed run's own
// output: a CI log is read from its tail (stop 28's log did not say what
// had failed). Before, a lane per list of architectures (amd64 beside
// arm64 then riscv64) left a core idle once amd64's lane was done.
func TestVMCIRunsAQueueTwoAtATimeAndRecapsFailures(t *testing.T) {
	c := newVMCI(t, "vm-tests/scenario.py vm-tests/smoke.py", "vm-tests/fail.py vm-tests/extra.py")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.command(ctx, "amd64", "arm64", "riscv64").CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("ci.sh passed with amd64's fail.py failing:\n%s", text)
	}
	started, most, mostScenarios := c.events(t)
	// Two workers: which of two runs taken one after the other writes its
	// start first is up to the scheduler; each run starts once, the
	// scenarios in the queue's order (the whole order: the one-lane test).
	sorted := slices.Sorted(slices.Values(started))
	want := []string{"amd64 extra", "amd64 fail", "amd64 scenario", "amd64 smoke", "arm64 scenario", "arm64 smoke", "riscv64 scenario", "riscv64 smoke"}
	scenarios := slices.DeleteFunc(slices.Clone(started), func(run string) bool { return !strings.HasSuffix(run, " scenario") })
	if !slices.Equal(sorted, want) || !slices.Equal(scenarios, []string{"amd64 scenario", "arm64 scenario", "riscv64 scenario"}) {
		t.Errorf("runs started %q, want each of %q once, the scenarios amd64, arm64, riscv64", started, want)
	}
	if most != 2 {
		t.Errorf("at most %d runs at once, want 2 (two workers)", most)
	}
	if mostScenarios != 1 {
		t.Errorf("at most %d scenarios at once, want 1: runs started %q", mostScenarios, started)
	}
	for _, want := range []string{"[amd64] amd64 saw another run", "[arm64] arm64 scenario PASS", "[riscv64] riscv64 smoke PASS"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	recap := text[strings.LastIndex(text, "vm-test-ci: recap"):]
	for _, want := range []string{"run.sh: amd64: fail FAIL", "run.sh: riscv64: scenario PASS",
		"vm-test-ci: FAILED: amd64 (fail)", "[amd64] amd64: step 3 went wrong", "[amd64] FAIL: amd64 the reason",
		"vm-test-ci: PASS: arm64", "vm-test-ci: PASS: riscv64"} {
		if !strings.Contains(recap, want) {
			t.Errorf("the recap at the end lacks %q:\n%s", want, recap)
		}
	}
	if strings.Contains(recap, "amd64 extra PASS") {
		t.Errorf("the recap repeats a run that passed:\n%s", recap)
	}
}

func TestVMCIPassesWhenEveryRunPasses(t *testing.T) {
	c := newVMCI(t, "vm-tests/smoke.py", "vm-tests/extra.py")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.command(ctx, "amd64", "arm64", "riscv64").CombinedOutput()
	if err != nil {
		t.Fatalf("ci.sh: %v:\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); lines[len(lines)-1] != "vm-test-ci: PASS: amd64 arm64 riscv64" {
		t.Fatalf("last line %q, want the PASS of all three:\n%s", lines[len(lines)-1], out)
	}
}

// VM_CI_LANES=1: one run at a time, in the queue's order: every
// architecture's first script (make lists the longest first), amd64's
// extras, then the second...: the short runs fill the end. Only amd64
// runs the steps that are the same on every architecture.
func TestVMCIOneLaneRunsOneAtATime(t *testing.T) {
	c := newVMCI(t, "vm-tests/scenario.py vm-tests/smoke.py", "vm-tests/extra.py")
	c.env = append(c.env, "VM_CI_LANES=1", "WAIT_STEPS=10")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.command(ctx, "amd64", "arm64").CombinedOutput()
	if err != nil {
		t.Fatalf("ci.sh: %v:\n%s", err, out)
	}
	started, most, _ := c.events(t)
	want := []string{"amd64 scenario", "arm64 scenario", "amd64 extra", "amd64 smoke", "arm64 smoke"}
	if most != 1 || !slices.Equal(started, want) {
		t.Errorf("runs started %q, at most %d at once; want %q, one at a time:\n%s", started, most, want, out)
	}
	if !strings.Contains(string(out), "[amd64] amd64 ran alone") {
		t.Errorf("amd64's smoke saw another run beside it:\n%s", out)
	}
	skips, err := os.ReadFile(filepath.Join(c.marks, "skip"))
	if err != nil {
		t.Fatal(err)
	}
	wantSkips := "amd64 scenario \narm64 scenario 1\namd64 extra \namd64 smoke \narm64 smoke 1\n"
	if string(skips) != wantSkips {
		t.Errorf("VM_SKIP_ARCH_NEUTRAL per run:\n%s\nwant (amd64 every step, the others without the architecture-neutral ones):\n%s", skips, wantSkips)
	}
}

// An interrupted make test (CI's timeout, ^C) stops both running runs.
func TestVMCIInterruptStopsBothRuns(t *testing.T) {
	c := newVMCI(t, "vm-tests/hang.py", "")
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
			t.Errorf("run %d (pid %d) still runs after ci.sh ended", i+1, pid)
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

// fakeGoTest writes a stand-in for `go` that records each call's
// arguments (one line a call) and answers as go test would: pkg/a passes;
// pkg/b fails on the first call, and on the second too if bFailsTwice.
func fakeGoTest(t *testing.T, bFailsTwice bool) (goBin, calls string) {
	t.Helper()
	dir := t.TempDir()
	goBin, calls = filepath.Join(dir, "go"), filepath.Join(dir, "calls")
	second := "echo \"ok\tpkg/b\t0.1s\"; exit 0"
	if bFailsTwice {
		second = "printf 'FAIL\\tpkg/b\\t0.1s\\nFAIL\\n'; exit 1"
	}
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" +
		"if [ ! -e " + dir + "/ran ]; then touch " + dir + "/ran\n" +
		"printf 'ok\\tpkg/a\\t0.1s\\npanic: test timed out after 5m0s\\nFAIL\\tpkg/b\\t300.1s\\nFAIL\\n'; exit 1; fi\n" +
		second + "\n"
	if err := os.WriteFile(goBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return goBin, calls
}

func runMultiarch(t *testing.T, goBin string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./multiarch.sh", "arm64", "qemu-aarch64-static", "pkg/a", "pkg/b")
	cmd.Env = append(os.Environ(), "GO="+goBin, "MULTIARCH_TIMEOUT=5m")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Under qemu-user a package whose test hung (a child stuck between fork
// and exec in the emulator) runs once more, alone, and the architecture
// passes if it passes then, saying so; the others are not run again.
func TestMultiarchRunsFailedPackagesOnceMore(t *testing.T) {
	goBin, calls := fakeGoTest(t, false)
	out, err := runMultiarch(t, goBin)
	if err != nil {
		t.Fatalf("multiarch.sh with pkg/b passing the second time: %v:\n%s", err, out)
	}
	if !strings.Contains(out, "test-multiarch: arm64: passed the second time: pkg/b") {
		t.Errorf("output does not name the package that passed the second time:\n%s", out)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := "test -count=1 -timeout 5m -exec qemu-aarch64-static pkg/a pkg/b\n" +
		"test -count=1 -timeout 5m -exec qemu-aarch64-static pkg/b\n"
	if string(b) != want {
		t.Errorf("go was called with\n%s\nwant\n%s", b, want)
	}
}

// A package that fails twice fails the architecture.
func TestMultiarchFailsWhatFailsTwice(t *testing.T) {
	goBin, _ := fakeGoTest(t, true)
	out, err := runMultiarch(t, goBin)
	if err == nil {
		t.Fatalf("multiarch.sh passed with pkg/b failing twice:\n%s", out)
	}
	if strings.Contains(out, "passed the second time") {
		t.Errorf("output says a second run passed:\n%s", out)
	}
}
