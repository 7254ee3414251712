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
	sleeper := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- sleeper.Wait() }()
	t.Cleanup(func() { sleeper.Process.Kill() })
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childNetNS+"="+ns.Name)
	out, err := child.CombinedOutput()
	if err != nil {
		t.Fatalf("the process that deleted the namespace from inside it: %v (before: signal: killed by its own cleanup)\n%s", err, out)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Errorf("the process inside the namespace ended well instead of being killed")
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the process inside the namespace still runs 20 s after the namespace's cleanup")
	}
}
