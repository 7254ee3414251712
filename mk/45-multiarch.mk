# The Go tests for arm64 and riscv64, run under qemu-user: go test -exec runs
# each test binary through the emulator, and binfmt_misc (vm-tests/binfmt.sh,
# root only) lets tests that build and start our binaries run them too.
TEST_TARGETS += test-multiarch
APT_PACKAGES += qemu-user-static
MULTIARCH ?= arm64:aarch64 riscv64:riscv64
# Packages left out of the emulated runs (CI's 60-minute budget): their tests
# took ~270 s of emulation per architecture (daemon 160, cli 55, discovery 32,
# demo 21 s), and what they do that differs by architecture (signals, rlimits,
# socket activation, sd_notify, netlink through netcfg) runs for real in each
# architecture's VM smoke and scenario. Every other package (netcfg, listen,
# proxy, announce, doctor...) still runs under both emulators; a new package
# is in unless it is named here (docs and mk test files and the Makefile,
# not code; internal/mangen writes the man pages on the build machine).
# MULTIARCH_SKIP= runs them all.
MULTIARCH_SKIP ?= service/daemon service/cli service/discovery cmd/vipproxy-demo docs mk internal/mangen

# Each package's tests under emulation: the slowest took 90 s (netcfg), and
# a child stuck in qemu-user costs this much before the package's second
# run (mk/multiarch.sh says why it gets one).
MULTIARCH_TIMEOUT ?= 5m

.PHONY: test-multiarch
# The architectures run side by side (each line prefixed with its GOARCH):
# much of their time is the tests' own waits (netcfg, announce: ~60 and
# ~34 s under each emulator), which overlap then; a verdict per
# architecture ends the output.
test-multiarch:
	@set -e; mod=$$($(GO) list -m); pkgs=$$($(GO) list ./... | grep -vxF -f <(printf "$$mod/%s\n" $(MULTIARCH_SKIP))); \
	for a in $(MULTIARCH); do \
		if [ "$$(id -u)" = 0 ]; then vm-tests/binfmt.sh $${a%%:*} || echo "binfmt_misc unavailable: tests that start built binaries will fail"; fi; \
	done; \
	pids=; for a in $(MULTIARCH); do \
		goarch=$${a%%:*}; qemu=qemu-$${a##*:}-static; \
		echo "--- go test GOARCH=$$goarch (-exec $$qemu)"; \
		( GO=$(GO) MULTIARCH_TIMEOUT=$(MULTIARCH_TIMEOUT) mk/multiarch.sh $$goarch $$qemu $$pkgs 2>&1 | sed -u "s/^/[$$goarch] /"; \
			exit $${PIPESTATUS[0]} ) & pids="$$pids $$goarch:$$!"; \
	done; \
	rc=0; for p in $$pids; do \
		if wait $${p#*:}; then echo "test-multiarch: $${p%%:*}: PASS"; else echo "test-multiarch: $${p%%:*}: FAIL"; rc=1; fi; \
	done; exit $$rc
