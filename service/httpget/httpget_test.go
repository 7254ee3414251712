package httpget

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// server accepts one connection on loopback and hands it to serve; the
// test ends it.
func server(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

func get(t *testing.T, ctx context.Context, addr string, headerTimeout time.Duration) (*http.Response, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	return Get(ctx, conn, req, headerTimeout)
}

// bounded is a context for a step that must end well before it does.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The answer comes back; the request said Connection: close; closing the
// body closes the connection (the server reads EOF).
func TestGetReadsTheAnswerAndClosesWithTheBody(t *testing.T) {
	sawEOF := make(chan bool, 1)
	addr := server(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		req, err := http.ReadRequest(r)
		if err != nil || req.URL.Path != "/readyz" || !req.Close {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nready: ok")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = r.ReadByte()
		sawEOF <- errors.Is(err, io.EOF)
	})
	resp, err := get(t, bounded(t), addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(body) != "ready: ok" {
		t.Fatalf("answer %d %q %v", resp.StatusCode, body, err)
	}
	resp.Body.Close()
	if !<-sawEOF {
		t.Error("closing the body did not close the connection")
	}
}

// A server that never answers: the header timeout ends the wait even
// when ctx has no deadline.
func TestGetHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	addr := server(t, func(net.Conn) { <-release })
	_, err := get(t, context.Background(), addr, 50*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.HasPrefix(err.Error(), "read response: ") {
		t.Fatalf("silent server: %v, want a read deadline error", err)
	}
}

// Cancelling ctx ends a wait for the answer at once, and says so.
func TestGetEndsWithCtx(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	addr := server(t, func(net.Conn) { <-release })
	ctx, cancel := context.WithCancel(bounded(t))
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := get(t, ctx, addr, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting: %v, want context.Canceled", err)
	}
}

// After the headers only ctx bounds the body: a stream (a watch) that
// sends its next event later than the header timeout is read; the end of
// ctx then ends the read.
func TestGetBodyOutlivesTheHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	addr := server(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
		time.Sleep(200 * time.Millisecond) // longer than the header timeout
		io.WriteString(c, "{\"event\":1}\n")
		<-release
	})
	ctx, cancel := context.WithCancel(bounded(t))
	resp, err := get(t, ctx, addr, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "{\"event\":1}\n" {
		t.Fatalf("event after the header timeout: %q %v", line, err)
	}
	cancel()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after ctx ended succeeded")
	}
}
