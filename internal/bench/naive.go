package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// runNaive is the straightforward proxy the issue measured as a reference,
// written the way tcpproxy's DialProxy works: accept, dial the next backend
// round-robin, io.Copy each direction (splice through a pipe held for the
// connection's whole life). No health checks, no retry. A baseline for the
// bench, never a product.
func runNaive(ctx context.Context, listen string, backends []string) error {
	if len(backends) == 0 {
		return fmt.Errorf("naive proxy: no backends")
	}
	ln, err := listenUntilDone(ctx, listen)
	if err != nil {
		return fmt.Errorf("naive proxy: %w", err)
	}
	var next atomic.Uint64
	for ctx.Err() == nil {
		c, err := ln.Accept()
		if err != nil {
			// tcpproxy stops on the first accept error; the baseline does too.
			return fmt.Errorf("naive proxy accept: %w", err)
		}
		backend := backends[next.Add(1)%uint64(len(backends))]
		go naiveConn(c, backend)
	}
	return nil
}

func naiveConn(c net.Conn, backend string) {
	defer c.Close()
	b, err := net.DialTimeout("tcp", backend, 2*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go naiveCopy(b.(*net.TCPConn), c.(*net.TCPConn), done)
	go naiveCopy(c.(*net.TCPConn), b.(*net.TCPConn), done)
	<-done
}

func naiveCopy(dst, src *net.TCPConn, done chan<- struct{}) {
	io.Copy(dst, src)
	dst.CloseWrite()
	done <- struct{}{}
}
