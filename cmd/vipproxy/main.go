// Command vipproxy is the control-plane load balancer: see service/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vipproxy/vipproxy/service/cli"
)

// version and commit are set at build time with -ldflags "-X main.version=...
// -X main.commit=..." (the Makefile: git describe, or a release's VERSION
// file); left empty, cli.BuildVersion reads what the Go toolchain recorded.
var version, commit string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	v, c := cli.BuildVersion(version, commit)
	code := cli.Main(ctx, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Version: v, Commit: c}, os.Args[1:])
	stop()
	os.Exit(code)
}
