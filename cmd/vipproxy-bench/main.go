// Command vipproxy-bench measures vipproxy against a direct connection,
// HAProxy and nginx on loopback: see internal/bench.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vipproxy/vipproxy/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
