// Command localuser is what a hostile local user runs against the probe's
// path to the daemon, for the probe tests (run as another uid):
//
//	localuser answer NETWORK ADDRESS  answer every request 200 "ready: api 3/3 backends healthy",
//	                                  and /status as vipproxy's JSON: ready, one more reload each time
//	localuser hold SOCKET N           hold N idle connections to SOCKET, opening another 50 ms after one closes
//
// Each prints "ready" on stdout once it listens or holds its N
// connections, and runs until it is killed.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 4 {
		fail(fmt.Errorf("usage: localuser answer NETWORK ADDRESS | hold SOCKET N"))
	}
	switch os.Args[1] {
	case "answer":
		answer(os.Args[2], os.Args[3])
	case "hold":
		n, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fail(err)
		}
		hold(os.Args[2], n)
	default:
		fail(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
}

func answer(network, addr string) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		fail(err)
	}
	if network == "unix" {
		if err := os.Chmod(addr, 0o666); err != nil { // any user may connect
			fail(err)
		}
	}
	fmt.Println("ready")
	var reloads atomic.Uint64
	fail(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			fmt.Fprintf(w, `{"ready":true,"version":"v9.9.9","reloads":%d,"ports":[{"name":"api","required":true,"healthy":3,"backends":3}]}`, reloads.Add(1))
			return
		}
		io.WriteString(w, "ready: api 3/3 backends healthy\n")
	})))
}

func hold(sock string, n int) {
	opened := make(chan struct{}, n)
	for range n {
		go func() {
			for first := true; ; first = false {
				c, err := net.Dial("unix", sock)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if first {
					opened <- struct{}{}
				}
				io.Copy(io.Discard, c) // idle: send nothing, read until closed
				c.Close()
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	for range n {
		<-opened
	}
	fmt.Println("ready")
	select {}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "localuser:", err)
	os.Exit(1)
}
