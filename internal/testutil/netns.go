package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// NetNS is a private network namespace that one test creates and deletes.
type NetNS struct{ Name string }

// NewNetNS creates a namespace (prefix and a random suffix) with lo up,
// deleted when the test ends, or skips the test where that is impossible
// (not root, no iproute2, ip netns unusable).
func NewNetNS(t testing.TB, prefix string) *NetNS {
	t.Helper()
	n, err := OpenNetNS(t, prefix)
	if err != nil {
		t.Skip(err)
	}
	return n
}

// OpenNetNS is NewNetNS for a test that goes on without the namespace:
// the error says why there is none. When the test ends, whatever still
// runs inside is killed and the namespace deleted.
func OpenNetNS(t testing.TB, prefix string) (*NetNS, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("needs ip (iproute2)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	n := &NetNS{Name: prefix + "-" + hex.EncodeToString(b)}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add unusable here: %v: %s", err, out)
	}
	t.Cleanup(n.delete)
	n.IP(t, "link", "set", "lo", "up")
	return n, nil
}

// delete kills what still runs in the namespace, then deletes it.
func (n *NetNS) delete() {
	n.KillAll()
	exec.Command("ip", "netns", "del", n.Name).Run()
}

// KillAll sends SIGKILL to every process in the namespace. This process
// is never among them: `ip netns pids` names a process by its main
// thread's namespace, and a goroutine locked to that thread may have
// left it in the namespace (Go keeps the main thread when a goroutine
// exits locked to it). Killing it here ended service/announce's test
// binary with "signal: killed" and no result (fresh .ci/run, 2026-12-02).
func (n *NetNS) KillAll() {
	if out, err := exec.Command("ip", "netns", "pids", n.Name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// IP runs `ip -n NAME args...` and fails the test on error.
func (n *NetNS) IP(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
}

// Veth creates an up veth pair a<->b inside the namespace: the kernel here
// has no dummy module, so one end stands in for a dummy link or an uplink.
func (n *NetNS) Veth(t testing.TB, a, b string) {
	t.Helper()
	n.IP(t, "link", "add", a, "type", "veth", "peer", "name", b)
	n.IP(t, "link", "set", a, "up")
	n.IP(t, "link", "set", b, "up")
}

// Exec runs a command inside the namespace and returns its combined output.
func (n *NetNS) Exec(name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...).CombinedOutput()
	return string(out), err
}
