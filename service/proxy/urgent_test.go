package proxy

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// sendWithUrgent sends "abc", an urgent "X" (MSG_OOB), then "def".
func sendWithUrgent(c net.Conn) error {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	c.Write([]byte("abc"))
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), []byte("X"), unix.MSG_OOB, nil)
		return serr != unix.EAGAIN
	}); err != nil || serr != nil {
		return fmt.Errorf("send urgent data: %v %v", err, serr)
	}
	_, err = c.Write([]byte("def"))
	return err
}

// Bytes after an urgent byte (MSG_OOB) pass on at once, in both
// directions, and the urgent byte itself passes in line, an ordinary
// byte (its urgency is not passed on): the stream stays whole. A read
// stops at the urgent mark, so a short read does not mean that the
// socket is drained; measured on 2026-12-05, 6 of 10 connections
// received "abc" and then nothing until their peer sent again.
func TestBytesAfterUrgentDataPassOn(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		const conns = 20
		const want = "abcXdef"
		for _, sender := range []string{"client", "backend"} {
			t.Run(sender, func(t *testing.T) {
				got := make(chan string, conns)
				backend := testutil.ServeAddr(t, func(c net.Conn) {
					defer c.Close()
					if sender == "backend" {
						if err := sendWithUrgent(c); err != nil {
							t.Error(err)
						}
						io.Copy(io.Discard, c)
						return
					}
					got <- readWithin(c, len(want))
				})
				_, _, addr := startProxyOn(t, plain, backend)
				for range conns {
					c := dial(t, addr)
					if sender == "client" {
						if err := sendWithUrgent(c); err != nil {
							t.Fatal(err)
						}
					} else {
						go func() { got <- readWithin(c, len(want)) }()
					}
				}
				for i := range conns {
					if s := <-got; s != want {
						t.Errorf("connection %d: %q arrived; want %q", i, s, want)
					}
				}
			})
		}
	})
}

// readWithin reads n bytes, or what came within 10 s.
func readWithin(c net.Conn, n int) string {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, n)
	k, _ := io.ReadFull(c, buf)
	return string(buf[:k])
}

// Urgent data right after bulk, which a direction splices on a goroutine
// of its own: a splice stops at the urgent mark too, and Go's poller
// reports no urgent data, so the rest passes on at the direction's next
// idle checks (it parks, and the parker reads on), not never.
func TestUrgentDataAfterBulkPassesOn(t *testing.T) {
	eachEngine(t, func(t *testing.T, plain bool) {
		const conns = 5
		const bulk = 1 << 20
		const want = "abcXdef"
		got := make(chan string, conns)
		backend := testutil.ServeAddr(t, func(c net.Conn) {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.CopyN(io.Discard, c, bulk)
			got <- readWithin(c, len(want))
		})
		_, _, addr := startProxyOn(t, plain, backend)
		for range conns {
			c := dial(t, addr)
			c.Write(make([]byte, bulk))
			if err := sendWithUrgent(c); err != nil {
				t.Fatal(err)
			}
		}
		for i := range conns {
			if s := <-got; s != want {
				t.Errorf("connection %d: %q arrived after the bulk; want %q", i, s, want)
			}
		}
	})
}
