package cli

import (
	"context"
	"fmt"
)

func runUnits(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stderr, "vipproxy units: not implemented yet")
	return ExitFailure
}
