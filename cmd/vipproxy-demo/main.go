// Command vipproxy-demo runs the main job on loopback with no setup: three
// stand-in mTLS apiservers, the real `vipproxy serve` in front, a client
// showing the balancing, a backend SIGKILLed and restarted. See demo.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	exe, _ := os.Executable()
	binDir := flag.String("bin", filepath.Dir(exe), "directory holding vipproxy and vipproxy-apiserver")
	requests := flag.Int("requests", 30, "requests per phase")
	keep := flag.Bool("keep", false, "keep the temporary directory (pki, config, logs)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	_, err := runDemo(ctx, demoOptions{BinDir: *binDir, Out: os.Stdout, Requests: *requests, Keep: *keep})
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vipproxy-demo: %v\n", err)
		os.Exit(1)
	}
}
