// Command vipproxy is the control-plane load balancer: see service/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vipproxy/vipproxy/service/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Version: version}, os.Args[1:])
	stop()
	os.Exit(code)
}
