package testutil

import (
	"os"
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

// CheckPeriod is the health check interval (and timeout) a test config
// should use: native natively, emulationSlowdown times longer under
// qemu-user, so that a check's own cost is never what a test measures.
func CheckPeriod(native time.Duration) string {
	if Emulated() {
		native *= emulationSlowdown
	}
	return native.String()
}
