# The Go tests for arm64 and riscv64, run under qemu-user: go test -exec runs
# each test binary through the emulator, and binfmt_misc (vm-tests/binfmt.sh,
# root only) lets tests that build and start our binaries run them too.
TEST_TARGETS += test-multiarch
APT_PACKAGES += qemu-user-static
MULTIARCH ?= arm64:aarch64 riscv64:riscv64

.PHONY: test-multiarch
test-multiarch:
	@set -e; for a in $(MULTIARCH); do \
		goarch=$${a%%:*}; qemu=qemu-$${a##*:}-static; \
		echo "--- go test GOARCH=$$goarch (-exec $$qemu)"; \
		if [ "$$(id -u)" = 0 ]; then vm-tests/binfmt.sh $$goarch || echo "binfmt_misc unavailable: tests that start built binaries will fail"; fi; \
		CGO_ENABLED=0 GOARCH=$$goarch VIPPROXY_QEMU_USER=$$qemu $(GO) test -count=1 -exec $$qemu ./...; \
	done
