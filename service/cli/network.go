package cli

import (
	"context"
	"fmt"
)

func runNetwork(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy network: not implemented yet")
	return ExitFailure
}
