package cli

import (
	"context"
	"fmt"
)

func runKeepalived(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy keepalived: not implemented yet")
	return ExitFailure
}
