package netcfg

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// vipproxyBin returns the vipproxy binary: $VIPPROXY_BIN (make passes
// bin/vipproxy) or one built once for this test run.
func vipproxyBin(t *testing.T) string {
	t.Helper()
	bin := testutil.Command(t, "vipproxy")
	// Under go test -exec qemu-<arch>-static the binary is built for that
	// GOARCH and may not be executable by `ip netns exec` (no binfmt).
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		t.Skipf("the vipproxy binary built for GOARCH=%s cannot run here: %v: %s", runtime.GOARCH, err, out)
	}
	return bin
}

// TestMain removes the binary built for the scenarios.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}

func (n *testNS) exec(name string, args ...string) (string, error) { return n.Exec(name, args...) }

// vethTo links this namespace's interface a to interface b in other, both up.
func (n *testNS) vethTo(t *testing.T, a string, other *testNS, b string) {
	t.Helper()
	n.ip(t, "link", "add", a, "type", "veth", "peer", "name", b, "netns", other.name)
	n.ip(t, "link", "set", a, "up")
	other.ip(t, "link", "set", b, "up")
}

// inNS runs fn on an OS thread switched into the namespace: sockets made
// there stay in that namespace after fn returns.
func (n *testNS) inNS(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(n.ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// serveGreeting listens on addr inside the namespace and writes greeting to
// every connection, standing in for an apiserver.
func (n *testNS) serveGreeting(t *testing.T, addr, greeting string) {
	t.Helper()
	var ln net.Listener
	if err := n.inNS(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, n.name, err)
	}
	testutil.Serve(t, ln, func(c net.Conn) {
		fmt.Fprintln(c, greeting)
		c.Close()
	})
}

// fetch dials addr from inside the namespace and returns the first line
// the server sends; the dial is bounded by timeout.
func (n *testNS) fetch(addr string, timeout time.Duration) (string, error) {
	var conn net.Conn
	err := n.inNS(func() (err error) { conn, err = net.DialTimeout("tcp", addr, timeout); return err })
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// writeConfig writes a vipproxy config and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
