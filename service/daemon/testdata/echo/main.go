// Command echo is the raw TCP backend of the many-connections test and the
// soak: it echoes each connection back and answers a half-close with one.
// It runs as its own process so that it can be SIGKILLed and so that its
// descriptors do not count against the test's or the proxy's limit. Each
// connection costs one goroutine and a 2 KiB buffer.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			time.Sleep(10 * time.Millisecond) // out of descriptors: wait, do not exit
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo: accept:", err)
			os.Exit(1)
		}
		go echo(c.(*net.TCPConn))
	}
}

// echo copies c back to itself; on the client's end of stream it
// half-closes its own side, so the client still reads everything.
func echo(c *net.TCPConn) {
	defer c.Close()
	buf := make([]byte, 2048)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err == io.EOF {
			c.CloseWrite()
			return
		}
		if err != nil {
			return
		}
	}
}
