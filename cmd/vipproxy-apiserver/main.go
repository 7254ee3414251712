// Command vipproxy-apiserver is a stand-in mTLS Kubernetes apiserver for
// tests, the demo and the VM tests; `vipproxy-apiserver pki` writes a test
// PKI. See internal/standin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vipproxy/vipproxy/internal/standin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := standin.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
