package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// killedBackendEnv makes the test binary, run again by
// TestSIGKILLedBackend, the backend process it kills: "read" reads the
// client's bytes before it answers, "unread" leaves them unread.
const killedBackendEnv = "VIPPROXY_TEST_KILLED_BACKEND"

// A backend process SIGKILLed mid-answer: the kernel closes its sockets
// as close(2) would, with a reset if the client's bytes lay unread (the
// client then gets a reset too, never a clean end of a cut answer), and
// with a FIN if it had read them all, which reaches the client as the
// clean end it is on the wire (docs/how-it-works.md, Data path).
func TestSIGKILLedBackend(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		if mode := os.Getenv(killedBackendEnv); mode != "" {
			serveUntilKilled(mode)
			return
		}
		for _, mode := range []string{"unread", "read"} {
			t.Run(mode, func(t *testing.T) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLedBackend$")
				cmd.Env = append(os.Environ(), killedBackendEnv+"="+mode)
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				lines := bufio.NewScanner(out)
				if !lines.Scan() {
					t.Fatal("the backend process said nothing")
				}
				_, _, addr := startProxyOn(t, plain, lines.Text())
				c := dial(t, addr)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Write([]byte("ping"))
				if !lines.Scan() { // it answered, and read or holds "ping"
					t.Fatal("the backend process did not get the client's bytes")
				}
				cmd.Process.Signal(syscall.SIGKILL)
				got, err := io.ReadAll(c)
				reset := errors.Is(err, syscall.ECONNRESET)
				if string(got) != "partial" || reset != (mode == "unread") || (!reset && err != nil) {
					t.Fatalf("client got %q, then %v; want %q, then a reset if the backend left bytes unread, else the end", got, err, "partial")
				}
			})
		}
	})
}

// serveUntilKilled accepts one connection on loopback (its address the
// first line out), answers "partial" once the client's 4 bytes are in,
// read or not as mode says, prints a second line and waits to be killed
// (a minute at most).
func serveUntilKilled(mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(2)
	}
	fmt.Println(ln.Addr())
	c, err := ln.Accept()
	if err != nil {
		os.Exit(2)
	}
	if mode == "read" {
		io.ReadFull(c, make([]byte, 4))
	} else {
		raw, _ := c.(*net.TCPConn).SyscallConn()
		queued := 0
		for i := 0; i < 10000 && queued < 4; i++ {
			raw.Control(func(fd uintptr) { queued, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
			time.Sleep(time.Millisecond)
		}
	}
	c.Write([]byte("partial"))
	fmt.Println("ready")
	time.Sleep(time.Minute) // the test kills it long before
	os.Exit(2)
}
