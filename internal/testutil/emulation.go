package testutil

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Emulated reports a run under qemu-user (make test-multiarch sets
// VIPPROXY_QEMU_USER), where every process is several times slower.
func Emulated() bool { return os.Getenv("VIPPROXY_QEMU_USER") != "" }

// emulationSlowdown is how much longer a health check may take under
// qemu-user. Measured in make test-multiarch (2026-12-01): a TLS handshake
// of the daemon's https check against a stand-in apiserver took over
// 200 ms under qemu-aarch64 on a loaded 2-core host, so 200 ms checks
// marked healthy backends down at random; 5x leaves room on both arches.
const emulationSlowdown = 5

// slowdownEnv names the factor of a run in a whole emulated machine: a
// TCG guest with one vCPU is slower than qemu-user (vm-tests/flood.py
// sets it; the measured reason is there).
const slowdownEnv = "VIPPROXY_TEST_SLOWDOWN"

// Slowdown is how many times longer than natively a test gives the work
// that costs CPU (a health check, an admin answer): $VIPPROXY_TEST_SLOWDOWN
// when set, emulationSlowdown under qemu-user, else 1. A value that is not
// a whole number from 1 to 100 panics with its name: a test run with a
// typo must not pass on native timings.
func Slowdown() time.Duration {
	if v := os.Getenv(slowdownEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			panic(fmt.Sprintf("%s=%q: want a whole number from 1 to 100", slowdownEnv, v))
		}
		return time.Duration(n)
	}
	if Emulated() {
		return emulationSlowdown
	}
	return 1
}

// Scaled is native times Slowdown: a wait or timeout that covers CPU work.
func Scaled(native time.Duration) time.Duration { return native * Slowdown() }

// CheckPeriod is the health check interval (and timeout) a test config
// should use: native natively, Slowdown times longer when emulated, so
// that a check's own cost is never what a test measures.
func CheckPeriod(native time.Duration) string { return Scaled(native).String() }
