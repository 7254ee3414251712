// Package testutil holds what the tests of several packages need alike:
// the commands built once, loopback listeners that serve until the test
// ends, free ports, a buffer shared with a child's output copier, and a
// bounded wait. Test code only.
package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a writer (a child's stderr copier, a
// logger) and the test may use at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitFor polls cond every 20 ms, at most 1500 times (30 s), and fails
// the test naming what it waited for when cond never holds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 1500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// Await returns what ch gives, or fails the test naming what it waited
// for when ch gives nothing within d (a bound for a hang, not a timing).
func Await[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("gave up after %v waiting for %s", d, what)
		var zero T
		return zero
	}
}

// Listen listens on addr ("127.0.0.1:0": a free port) until the test ends.
func Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Serve accepts on ln and runs handle on each connection, on a goroutine
// of its own, until the test ends; then it closes ln and every connection
// and waits for the handlers.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c)
			}()
		}
	}()
}

// Close is a handler that closes each connection at once: enough for a
// TCP check to pass.
func Close(c net.Conn) { c.Close() }

// Silent is a handler that keeps each connection open and never answers
// (until the test ends): a backend that hangs.
func Silent(net.Conn) {}

// ServeAddr is Serve on a new loopback listener; it returns its address.
func ServeAddr(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln := Listen(t, "127.0.0.1:0")
	Serve(t, ln, handle)
	return ln.Addr().String()
}

// DeadAddress returns a loopback address where nothing listens.
func DeadAddress(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// FreePort returns a loopback port that was free a moment ago.
//
// It is picked below the kernel's ephemeral range. A port from
// Listen(":0") comes from that range, where the tests' own client
// connections take their source ports, so under load one of them could
// hold it by the time a daemon binds it (seen once in CI: "bind: address
// already in use" for the admin port of a restarted daemon).
func FreePort(t testing.TB) int {
	t.Helper()
	const lowest = 10000
	ephemeralLow := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &ephemeralLow)
	}
	for range 200 {
		if ephemeralLow <= lowest {
			break // an unusual range: fall back to the kernel's pick
		}
		port := lowest + rand.IntN(ephemeralLow-lowest)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// built are the programs Build built, by their build arguments.
var built struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

// Command returns the command cmd/NAME of this module built once per test
// binary (Build, with the extra build flags), or $VIPPROXY_BIN for
// vipproxy when set (make passes bin/vipproxy).
func Command(t testing.TB, name string, flags ...string) string {
	t.Helper()
	if p := os.Getenv("VIPPROXY_BIN"); p != "" && name == "vipproxy" {
		return p
	}
	return Build(t, "github.com/vipproxy/vipproxy/cmd/"+name, flags...)
}

// Build returns the program pkg (an import path, also one under a
// testdata directory) built once per test binary with the extra build
// flags (go build). RemoveBuilt deletes what it built.
func Build(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	key := fmt.Sprint(pkg, flags)
	if bin, ok := built.bins[key]; ok {
		return bin
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "vipproxy-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.bins = dir, map[string]string{}
	}
	// The file keeps the command's name: a process is known by it (doctor
	// tells vipproxy holding its own port from another program).
	bin := filepath.Join(built.dir, fmt.Sprint(len(built.bins)), path.Base(pkg))
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v: %s", pkg, err, out)
	}
	built.bins[key] = bin
	return bin
}

// RemoveBuilt deletes what Build built; TestMain calls it after m.Run.
func RemoveBuilt() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// EchoIntact sends payload on c, a connection to an echo server, closes
// its write side and fails the test unless the same bytes come back.
func EchoIntact(t testing.TB, c net.Conn, payload []byte) {
	t.Helper()
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echo: got %d bytes back, want the %d sent, intact", len(got), len(payload))
	}
}

// CloseOnce closes ch unless it is closed already: a stop signal that
// both a test and its cleanup may send.
func CloseOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// FreePortOn returns a port number that was free on every one of hosts
// (loopback addresses) a moment ago.
func FreePortOn(t testing.TB, hosts ...string) int {
	t.Helper()
	for range 50 {
		port, free := FreePort(t), true
		for _, h := range hosts {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, fmt.Sprint(port)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// FirstLine sends request on a new connection to addr and returns the
// first line of the answer, trimmed, within 10 s.
func FirstLine(t testing.TB, addr, request string) (string, error) {
	t.Helper()
	line, err := firstLine(t, "tcp", addr, request, 10*time.Second)
	return strings.TrimSpace(line), err
}

// firstLine sends request (if any) on a new connection to addr and
// returns the first line of the answer as it came, within d.
func firstLine(t testing.TB, network, addr, request string, d time.Duration) (string, error) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if request != "" {
		if _, err := io.WriteString(c, request); err != nil {
			return "", err
		}
	}
	return bufio.NewReader(c).ReadString('\n')
}

// Tool returns the path of the program name, or skips the test where it
// is not installed (make deps installs what the tests use).
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return path
}

// CopyFile copies from to to with mode, or fails the test. to is replaced
// in one step (written beside it, then renamed): a watcher of to never
// reads half a file.
func CopyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".tmp", data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}
