# VM tests: the ARP/hairpin scenario on Debian VMs under qemu (TCG), driven
# by NixOS-test-style scripts (vm-tests/*.py; the same scripts run in
# runNixOSTest, see vm-tests/*.nix). Needs root (network namespace, taps);
# skips cleanly without. ARCH=amd64 runs the whole scenario; arm64 and
# riscv64 run the one-node smoke. See vm-tests/README.md.
ARCH ?= amd64
VM_SCRIPTS_amd64 ?= vm-tests/smoke.py vm-tests/scenario.py
VM_SCRIPTS_arm64 ?= vm-tests/smoke.py
VM_SCRIPTS_riscv64 ?= vm-tests/smoke.py
VM_SCRIPTS ?= $(VM_SCRIPTS_$(ARCH))
# Packages the guest side needs on the host, per architecture (make deps
# installs the amd64 ones, which CI uses; the others on first use).
VM_APT_amd64 := qemu-system-x86
VM_APT_arm64 := qemu-system-arm qemu-user-static
VM_APT_riscv64 := qemu-system-misc opensbi qemu-user-static
APT_PACKAGES += $(VM_APT_amd64) debootstrap e2fsprogs iproute2 cpio kmod xz-utils zstd python3 ca-certificates pyflakes3
# The NixOS driver's globals the scripts may use (pyflakes must know them).
VM_PYFLAKES_BUILTINS := start_all,subtest,machines,driver,client,cp1,cp2,cp3

# CI (make test) runs the amd64 one-node smoke (socket activation details:
# the socket outlives the service) and the four-VM ARP/hairpin scenario,
# steps 1-8, with images built from nothing.
TEST_TARGETS += vm-test-ci

.PHONY: vm-test-ci
vm-test-ci:
	$(MAKE) --no-print-directory vm-test ARCH=amd64 VM_SCRIPTS="$(VM_SCRIPTS_amd64)"

.PHONY: vm-test vm-lint vm-image vm-clean
# The scripts must stay plain NixOS test scripts: pyflakes with the driver's
# globals, as runNixOSTest lints them. lint.py then checks offline what only
# a NixOS node would show: transient units that rely on the manager's PATH,
# unknown systemctl properties, and /usr/bin paths in what vipproxy renders.
VM_TEST_SCRIPTS := $(filter-out vm-tests/lint.py,$(wildcard vm-tests/*.py))
vm-lint: build
	PYFLAKES_BUILTINS=$(VM_PYFLAKES_BUILTINS) pyflakes3 vm-tests/*.py vm-tests/driver/*.py
	python3 vm-tests/lint.py --vipproxy $(BIN)/vipproxy $(VM_TEST_SCRIPTS)

vm-test: vm-lint
	@if [ "$$(id -u)" != 0 ] || [ ! -c /dev/net/tun ] || ! unshare --net true 2>/dev/null; then \
		echo "vm-test: SKIP (needs root, /dev/net/tun and network namespaces)"; exit 0; fi; \
	missing=$$(for p in $(VM_APT_$(ARCH)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi; \
	GO=$(GO) vm-tests/run.sh $(ARCH) $(VM_SCRIPTS)

vm-image:
	vm-tests/image.sh $(ARCH) vm-tests/.work/$(ARCH)

vm-clean:
	rm -rf vm-tests/.work
