package cli

import (
	"context"
	"fmt"
)

func runServe(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy serve: not implemented yet")
	return ExitFailure
}
