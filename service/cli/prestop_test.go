package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// prestop never holds up or fails a stop it cannot help: with the daemon
// gone (the unit's --pid=${MAINPID} is then empty) it has nothing to do,
// and a daemon it cannot reach drains by itself; both exit 0 and say so.
// A pid that is no number is a mistake in the unit: exit 2.
func TestPreStopNeverHoldsUpAStop(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "control.sock")
	for _, c := range []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{[]string{"prestop", "--pid="}, ExitOK, "the daemon is not running", ""},
		{[]string{"prestop", "--pid=12", "--job", "restart", "--control", missing}, ExitOK, "", "cannot tell the daemon (it drains)"},
		{[]string{"prestop", "--pid=x"}, ExitUsage, "", "is not a process id"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Env{Stdout: &out, Stderr: &errOut, Version: "test"}, c.args)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.inErr) {
			t.Errorf("vipproxy %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)",
				strings.Join(c.args, " "), code, c.code, out.String(), c.out, errOut.String(), c.inErr)
		}
	}
}
