package testutil

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Start starts cmd with its stdout and stderr in the returned buffer and
// ends it when the test ends: SIGINT, then SIGKILL after 10 s. The log
// is printed when the test failed.
func Start(t testing.TB, cmd *exec.Cmd) *Buffer {
	t.Helper()
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", cmd.Path, out)
		}
	})
	return out
}

// StartReady starts cmd, which says it is ready with a first line on its
// stdout, and returns that line (or what came before cmd ended) within d,
// and a channel closed once cmd has ended (cmd.ProcessState is set then).
// cmd is killed when the test ends.
func StartReady(t testing.TB, cmd *exec.Cmd, d time.Duration) (string, <-chan struct{}) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	line := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		cmd.Wait()
		close(ended)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-ended })
	return Await(t, line, d, "the first line of "+cmd.Path), ended
}

// UnixFirstLine connects to the unix socket at sock and returns the first line
// it answers before it is sent anything (a probe socket's status line),
// waiting 30 s at most.
func UnixFirstLine(t testing.TB, sock string) string {
	t.Helper()
	line, _ := firstLine(t, "unix", sock, "", 30*time.Second)
	return line
}

// UnixClient speaks HTTP to the unix socket at sock, whatever the URL's
// host, with a 5 s timeout.
func UnixClient(sock string) *http.Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial}}
}
