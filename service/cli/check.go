package cli

import (
	"context"
	"fmt"
)

func runCheck(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy check: not implemented yet")
	return ExitFailure
}
