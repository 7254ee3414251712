// Package mk holds the tests of the Makefile's own recipes (the files
// here are make's; this test runs the real Makefile).
package mk

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
// test-multiarch failed, with vm-images-ci's make in do_wait).
func TestFailedTestStopsTheBackground(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "background.pid")
	extra := filepath.Join(dir, "extra.mk")
	rules := "mk-test-fail:\n\t@sleep 1; echo failing; exit 1\n" +
		"mk-test-background:\n\t@echo $$$$ > " + pidFile + "; echo preparing; bash -c 'trap \"exit 143\" TERM; (trap \"\" TERM; sleep 3)'; sleep 120; echo prepared\n"
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
