package activation

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The command sees what sd_listen_fds(3) checks: LISTEN_PID its own pid,
// LISTEN_FDS=1, the name, and fd 3 the very socket Socket opened, which
// still accepts connections.
func TestPassIsWhatSystemdPasses(t *testing.T) {
	f, err := Socket(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	socket, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())) // socket:[inode]
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `[ "$LISTEN_PID" = $$ ] && [ "$LISTEN_FDS" = 1 ] && [ "$LISTEN_FDNAMES" = vip ] && readlink /proc/$$/fd/3`)
	cmd.Env = os.Environ()
	Pass(cmd, f, "vip")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != socket {
		t.Fatalf("the command saw %q (%v), want LISTEN_* as systemd sets them and fd 3 = %s", out, err, socket)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the passed socket does not listen: %v", err)
	}
	c.Close()
}
