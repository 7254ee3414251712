//go:build !profile

package cli

import "errors"

// startCPUProfile refuses VIPPROXY_CPUPROFILE in builds without -tags profile.
func startCPUProfile(path string) (stop func(), err error) {
	if path != "" {
		return nil, errors.New("VIPPROXY_CPUPROFILE needs a binary built with -tags profile")
	}
	return func() {}, nil
}
