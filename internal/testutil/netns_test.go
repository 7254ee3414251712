package testutil

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// childNetNS names the namespace a child of TestDeleteSparesThisProcess
// moves its main thread into before it deletes it.
const childNetNS = "VIPPROXY_TESTUTIL_CHILD_NETNS"

// init keeps the main goroutine on the main thread in the child, so that
// TestMain can move that thread (the one /proc/PID/ns/net shows) into the
// namespace, as a goroutine locked to it and ended there leaves it.
func init() {
	if os.Getenv(childNetNS) != "" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(childNetNS); name != "" {
		os.Exit(deleteFromInside(name))
	}
	os.Exit(m.Run())
}

// deleteFromInside moves the main thread into the namespace name, then
// deletes it as a test's cleanup does; 0 if this process survived it.
func deleteFromInside(name string) int {
	h, err := netns.GetFromName(name)
	if err != nil {
		return 2
	}
	if err := netns.Set(h); err != nil {
		return 3
	}
	(&NetNS{Name: name}).delete()
	return 0
}

// A namespace's cleanup kills what runs inside it, but never the test
// process itself, even when its main thread was left in the namespace.
func TestDeleteSparesThisProcess(t *testing.T) {
	ns := NewNetNS(t, "spare")
	sleeper, ended := startInside(t, ns)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childNetNS+"="+ns.Name)
	out, err := child.CombinedOutput()
	if err != nil {
		t.Fatalf("the process that deleted the namespace from inside it: %v (before: signal: killed by its own cleanup)\n%s", err, out)
	}
	Await(t, ended, 20*time.Second, "the process inside the namespace to end after the namespace's cleanup")
	if sleeper.ProcessState.Success() {
		t.Errorf("the process inside the namespace ended well instead of being killed")
	}
}

// startInside starts a long sleep in ns and returns once it runs there.
// Start alone returns when `ip` has been executed, before it joins the
// namespace: a cleanup that came first found nothing inside to kill, and
// the sleep outlived it (project CI, stop 43).
func startInside(t *testing.T, ns *NetNS) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "sh", "-c", "echo inside; exec sleep 60")
	line, ended := StartReady(t, cmd, 30*time.Second)
	if line != "inside\n" {
		t.Fatalf("the sleep in %s never said it runs there: %q", ns.Name, line)
	}
	return cmd, ended
}
