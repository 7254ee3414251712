package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/daemon"
)

// runServe runs the daemon until SIGTERM or SIGINT (ctx), then drains.
func runServe(ctx context.Context, env Env, args []string) int {
	var path string
	fs := newFlags(env, "serve", &path)
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	if stop, err := startCPUProfile(os.Getenv("VIPPROXY_CPUPROFILE")); err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy serve: %v\n", err)
		return ExitFailure
	} else {
		defer stop()
	}
	err := daemon.Run(ctx, path, env.Version, env.Commit, env.Stderr)
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
