package cli

import (
	"context"
	"fmt"
)

func runProbe(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy probe: not implemented yet")
	return ExitFailure
}
