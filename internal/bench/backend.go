package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// The backend protocol: the first byte a client sends picks what the
// backend does with the connection, so one backend serves every figure and
// all contenders are fed the very same three backends.
const (
	modeEcho   = 'E' // echo every byte back (ping-pong latency)
	modeSink   = 'S' // read and discard until EOF (upload throughput)
	modeSource = 'R' // write zeros until the peer goes away (download throughput)
	modeFirst  = 'F' // write one byte, then hold until EOF (connection rate, idle)
	modeTagged = 'T' // read an 8-byte connection id, log it, then as modeFirst (failover)
)

// bulkChunk is the read/write size of the bulk modes: large enough that the
// backend and the client spend their time in the kernel, not in Go.
const bulkChunk = 256 << 10

// runBackend serves the bench protocol on listen until ctx ends. Tagged
// connections are logged to idLog (if not nil) before they are answered,
// so after a SIGKILL the bench knows which failed connections had already
// reached this backend: those were open, and no proxy can save them.
func runBackend(ctx context.Context, listen string, idLog *os.File) error {
	ln, err := listenUntilDone(ctx, listen)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	for ctx.Err() == nil {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// EMFILE and friends: wait for descriptors instead of dying.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serveBackendConn(c, idLog)
	}
	return nil
}

// listenUntilDone listens on addr and closes the listener when ctx ends,
// which ends the caller's accept loop.
func listenUntilDone(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err // net's error names the address
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	return ln, nil
}

func serveBackendConn(c net.Conn, idLog *os.File) {
	defer c.Close()
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return
	}
	switch mode[0] {
	case modeEcho:
		buf := make([]byte, 4096)
		io.CopyBuffer(writerOnly{c}, readerOnly{c}, buf)
	case modeSink:
		buf := make([]byte, bulkChunk)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	case modeSource:
		buf := make([]byte, bulkChunk)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	case modeFirst, modeTagged:
		if mode[0] == modeTagged {
			var id [8]byte
			if _, err := io.ReadFull(c, id[:]); err != nil {
				return
			}
			if idLog != nil {
				idLog.Write(id[:]) // one O_APPEND write: survives our SIGKILL
			}
		}
		if _, err := c.Write(mode[:1]); err != nil {
			return
		}
		var rest [64]byte
		for {
			if _, err := c.Read(rest[:]); err != nil {
				return
			}
		}
	}
}

// readerOnly and writerOnly hide ReadFrom/WriteTo so echo uses the plain
// buffered loop (no splice) that a real apiserver would also run.
type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }

// isTimeout reports whether err is the end of a deadline, which is how
// bounded load loops stop.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, errTimeout) || (errors.As(err, &ne) && ne.Timeout())
}

var errTimeout = errors.New("timeout")
