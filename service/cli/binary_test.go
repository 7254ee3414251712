package cli

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run the real binary, as an operator and systemd do.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// vipproxyBin returns $VIPPROXY_BIN (make passes bin/vipproxy) or a binary
// built once for this test run.
func vipproxyBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VIPPROXY_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vipproxy-cli-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "vipproxy")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-test", "-o", builtBin, "github.com/vipproxy/vipproxy/cmd/vipproxy")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// runBin runs the binary with args and returns stdout, stderr and the exit code.
func runBin(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(vipproxyBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func TestHelpAndVersionConventions(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a substring of stdout ("" : stdout must be empty)
		stderr string // a substring of stderr ("" : stderr must be empty)
	}{
		{[]string{"--help"}, 0, "usage: vipproxy COMMAND", ""},
		{[]string{"-h"}, 0, "usage: vipproxy COMMAND", ""},
		{[]string{"help"}, 0, "usage: vipproxy COMMAND", ""},
		{[]string{"help", "probe"}, 0, "usage: vipproxy probe", ""},
		{[]string{"--version"}, 0, "vipproxy v9.9.9-test", ""},
		{[]string{"version"}, 0, "vipproxy v9.9.9-test", ""},
		{[]string{"probe", "--help"}, 0, "-timeout", ""},
		{[]string{"check", "-h"}, 0, "-keepalived-conf", ""},
		{[]string{"serve", "--help"}, 0, "usage: vipproxy serve", ""},
		{[]string{"keepalived", "--help"}, 0, "-out", ""},
		{[]string{"network", "--help"}, 0, "usage: vipproxy network", ""},
		{[]string{"network", "apply", "--help"}, 0, "-netlink", ""},
		{[]string{"units", "--help"}, 0, "usage: vipproxy units", ""},
		{[]string{"units", "render", "--help"}, 0, "-root", ""},
		{[]string{}, 2, "", "usage: vipproxy COMMAND"},
		{[]string{"--bogus"}, 2, "", "unknown flag \"--bogus\""},
		{[]string{"bogus"}, 2, "", "unknown command \"bogus\""},
		{[]string{"probe", "--bogus"}, 2, "", "flag provided but not defined: -bogus\nusage: vipproxy probe"},
		{[]string{"check", "--bogus"}, 2, "", "usage: vipproxy check"},
		{[]string{"network", "render", "--bogus"}, 2, "", "usage: vipproxy network render"},
	} {
		stdout, stderr, code := runBin(t, tc.args...)
		okOut := tc.stdout == "" && stdout == "" || tc.stdout != "" && strings.Contains(stdout, tc.stdout)
		okErr := tc.stderr == "" && stderr == "" || tc.stderr != "" && strings.Contains(stderr, tc.stderr)
		if code != tc.code || !okOut || !okErr {
			t.Errorf("vipproxy %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)",
				strings.Join(tc.args, " "), code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
		}
	}
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 right now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startDaemon runs `vipproxy serve` on cfgText until the test ends and
// returns its stderr so far through the returned function.
func startDaemon(t *testing.T, cfgText string, env ...string) (cfgPath string, logs func() string, cmd *exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	cfgPath = filepath.Join(dir, "vipproxy.toml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	cmd = exec.Command(vipproxyBin(t), "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cfgPath, func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }, cmd
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitFor polls cond every 50 ms, at most 600 times (30 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 600 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// backendListener accepts and holds TCP connections: enough for tcp checks.
func backendListener(t *testing.T) string {
	t.Helper()
	ln := listen(t, "tcp", "127.0.0.1:0")
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestProbeOfRealDaemonSaysReadyOnce(t *testing.T) {
	admin := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	cfg := fmt.Sprintf("[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n[[backend]]\naddress = %q\n[admin]\nlisten = %q\n[health]\ninterval = \"100ms\"\ntimeout = \"100ms\"\nrise = 1\n",
		freeLoopbackPort(t), backendListener(t), admin)
	path, logs, _ := startDaemon(t, cfg)
	var stdout string
	waitFor(t, "probe to pass", func() bool {
		out, _, code := runBin(t, "probe", "--config", path)
		stdout = out
		return code == 0
	})
	if stdout != "ready: 1/1 backends healthy\n" {
		t.Errorf("probe stdout %q, want %q; daemon log:\n%s", stdout, "ready: 1/1 backends healthy\n", logs())
	}
}
