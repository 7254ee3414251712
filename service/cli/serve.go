package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/daemon"
)

// runServe runs the daemon until SIGTERM or SIGINT (ctx), then drains.
func runServe(ctx context.Context, env Env, args []string) int {
	var path string
	fs := newFlags(env, "serve", &path)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if stop, err := startCPUProfile(os.Getenv("VIPPROXY_CPUPROFILE")); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy serve: %v\n", err)
		return ExitFailure
	} else {
		defer stop()
	}
	err := daemon.Run(ctx, path, env.Version, env.Stderr)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "vipproxy serve: %v\n", err)
	var ce *config.Error
	if errors.As(err, &ce) {
		return ExitUsage
	}
	return ExitFailure
}

// startCPUProfile writes a CPU profile to path until stop is called; an
// empty path does nothing. For `make bench` (VIPPROXY_CPUPROFILE).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
