//go:build profile

package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile to path until stop is called; an
// empty path does nothing. Only in builds with -tags profile (make build
// GO_TAGS='nethttpomithttp2 profile', then vipproxy-bench --cpuprofile-dir
// DIR): runtime/pprof would add to every stripped binary.
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
