package standin

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestMain lets the test binary run as vipproxy-apiserver in a child
// process (STANDIN_MAIN=1), so the command and its signals are tested for real.
func TestMain(m *testing.M) {
	if os.Getenv("STANDIN_MAIN") == "1" {
		ctx, stop := signalContext()
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-ch; cancel() }()
	return ctx, cancel
}

func TestPKICommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"pki", "--dir", dir, "--hosts", "10.0.0.10, cp.example.org"}, &out, &errOut); code != 0 {
		t.Fatalf("pki = %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "ca="+filepath.Join(dir, "ca.pem")) {
		t.Errorf("pki output %q does not list the CA", out.String())
	}
	files := &testpki.Files{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem")}
	if _, err := files.ServerTLS(); err != nil {
		t.Fatal(err)
	}
}

// TestCommandSIGUSR1TogglesReadyz runs the real command in a child process.
func TestCommandSIGUSR1TogglesReadyz(t *testing.T) {
	files := pkitest.New(t)
	addr, cmd, logs := startCommand(t, files, "--name", "cp9")
	c := client(t, files)
	url := "https://" + addr + "/readyz"
	waitStatus(t, c, url, 200)
	cmd.Process.Signal(syscall.SIGUSR1)
	waitStatus(t, c, url, 500)
	cmd.Process.Signal(syscall.SIGUSR1)
	waitStatus(t, c, url, 200)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "readyz switched") {
		t.Errorf("logs do not show the switch:\n%s", logs.String())
	}
}

// waitStatus polls url (up to 10 s) until it answers code.
func waitStatus(t *testing.T, c *http.Client, url string, code int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last := "no answer"
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d; last: %s", url, code, last)
}

// TestCommandEndpointsFile runs the real command with --endpoints-file: the
// slices it serves follow the file, and a file that does not parse keeps
// the last set (the VM scenario removes an apiserver this way).
func TestCommandEndpointsFile(t *testing.T) {
	dir := t.TempDir()
	files, err := testpki.Write(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	epFile := filepath.Join(dir, "endpoints")
	writeFile(t, epFile, "# the cluster\n192.0.2.1:6443\n192.0.2.2:6443\n\n192.0.2.3:6443 # leaves next\n")
	addr, _, logs := startCommand(t, files, "--endpoints-file", epFile)
	c := client(t, files)
	waitStatus(t, c, "https://"+addr+"/readyz", 200)
	url := "https://" + addr + SlicesPath + "?labelSelector=kubernetes.io/service-name=kubernetes"
	waitListed(t, c, url, "192.0.2.1 192.0.2.2 192.0.2.3")

	writeFile(t, epFile, "192.0.2.1:6443\n192.0.2.2:6443\n")
	waitListed(t, c, url, "192.0.2.1 192.0.2.2")

	writeFile(t, epFile, "192.0.2.1:6443\nnot-an-endpoint\n")
	testutil.WaitFor(t, "the refusal of a bad endpoints file", func() bool { return strings.Contains(logs.String(), "endpoints file refused") })
	if _, body := get(t, c, url); !strings.Contains(body, `"192.0.2.2"`) {
		t.Errorf("a bad file changed the slices: %s", body)
	}
	if !strings.Contains(logs.String(), epFile+":2:") {
		t.Errorf("the log does not name the file and line:\n%s", logs.String())
	}
}

// waitListed polls the list (up to 10 s) until its addresses are want.
func waitListed(t *testing.T, c *http.Client, url, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, body := get(t, c, url)
		var addrs []string
		for _, m := range regexp.MustCompile(`"addresses":\["([^"]+)"\]`).FindAllStringSubmatch(body, -1) {
			addrs = append(addrs, m[1])
		}
		if got = strings.Join(addrs, " "); got == want {
			return
		}
	}
	t.Fatalf("listed endpoints %q, want %q", got, want)
}

// writeFile replaces path at once (rename), as the follower must never
// read a half-written file in this test.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startCommand runs this test binary as the stand-in command (STANDIN_MAIN)
// on a free loopback port with the test PKI and args, until the test ends.
func startCommand(t *testing.T, files *testpki.Files, args ...string) (addr string, cmd *exec.Cmd, logs *testutil.Buffer) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	cmd = exec.Command(os.Args[0], append([]string{"--listen", addr, "--cert", files.ServerCert, "--key", files.ServerKey, "--client-ca", files.CA}, args...)...)
	cmd.Env = append(os.Environ(), "STANDIN_MAIN=1")
	logs = &testutil.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return addr, cmd, logs
}

// TestCommandHeaderTimeout: --header-timeout closes a connection that
// never starts its handshake after that time, not after the 60 s default
// (vm-tests/flood.py raises it to hold the flood's raw connections).
func TestCommandHeaderTimeout(t *testing.T) {
	files := pkitest.New(t)
	addr, _, logs := startCommand(t, files, "--header-timeout", "300ms")
	waitStatus(t, client(t, files), "https://"+addr+"/readyz", 200)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("a silent connection was not closed after --header-timeout 300ms: read %v after %v\n%s", err, took, logs.String())
	}
}
