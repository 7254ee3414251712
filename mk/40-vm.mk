# VM tests: the ARP/hairpin scenario on Debian VMs under qemu (TCG), driven
# by NixOS-test-style scripts (vm-tests/*.py; the same scripts run in
# runNixOSTest, see vm-tests/nixos.nix). Needs root (network namespace,
# taps); skips cleanly without. Every ARCH runs the one-node smoke and the
# whole four-VM scenario. See vm-tests/README.md.
ARCH ?= amd64
VM_ARCHS := amd64 arm64 riscv64
VM_SCRIPTS ?= vm-tests/smoke.py vm-tests/scenario.py
# Images and runs: vm-tests/.work by default; the CI machine keeps its
# images in VM_CI_WORK (keyed by everything that goes into them, image.sh).
VM_WORK ?= $(CURDIR)/vm-tests/.work
VM_CI_WORK ?= /var/cache/vipproxy-vm
export VM_WORK
# Packages the guest side needs on the host, per architecture (make deps
# installs the amd64 ones; the others on first use).
VM_APT_amd64 := qemu-system-x86
VM_APT_arm64 := qemu-system-arm qemu-user-static
VM_APT_riscv64 := qemu-system-misc opensbi qemu-user-static
APT_PACKAGES += $(VM_APT_amd64) debootstrap e2fsprogs iproute2 cpio kmod xz-utils zstd python3 ca-certificates pyflakes3
# The NixOS driver's globals the scripts may use (pyflakes must know them).
VM_PYFLAKES_BUILTINS := start_all,subtest,machines,driver,client,cp1,cp2,cp3

# CI (make test): smoke and scenario on amd64 always (its image takes ~2 min
# from nothing), and on arm64 and riscv64 when the machine's image cache
# (VM_CI_WORK) holds their current image: building those from nothing takes
# ~23 and ~11 min, which with the rest of .ci/run would pass its 40 min.
# A foreign architecture without a cached image is reported as NOT COVERED,
# with the command that builds it (make vm-images on the CI machine after
# image.sh changes or the mirror moves to a new kernel); VM_CI_BUILD=1 builds
# it in CI instead. Measured times: vm-tests/README.md.
TEST_TARGETS += vm-test-ci
# The README's Debian quick start, followed verbatim on one fresh node
# (~1 min): on amd64 only, since it tests the README, not the architecture.
VM_CI_AMD64_EXTRA ?= vm-tests/quickstart.py

.PHONY: vm-test-ci vm-test-all vm-images
vm-test-ci:
	@set -e; rc=0; for a in $(VM_ARCHS); do \
		if [ $$a != amd64 ] && [ "$(VM_CI_BUILD)" != 1 ] && [ "$$(id -u)" = 0 ] && \
			! vm-tests/image.sh --check $$a $(VM_CI_WORK)/$$a >/dev/null 2>&1; then \
			echo "vm-test-ci: NOT COVERED: $$a (no current image in $(VM_CI_WORK)/$$a;" \
				"build it with: make vm-images VM_WORK=$(VM_CI_WORK))"; continue; fi; \
		scripts="$(VM_SCRIPTS)"; [ $$a != amd64 ] || scripts="$$scripts $(VM_CI_AMD64_EXTRA)"; \
		$(MAKE) --no-print-directory vm-test ARCH=$$a VM_WORK=$(VM_CI_WORK) VM_SCRIPTS="$$scripts" || rc=1; \
	done; exit $$rc

# Every architecture, full scenario (about 45 min with images built from
# nothing on the 2-core machine; see vm-tests/README.md).
vm-test-all:
	@rc=0; for a in $(VM_ARCHS); do $(MAKE) --no-print-directory vm-test ARCH=$$a || rc=1; done; exit $$rc

# The fd flood (TestFloodKeepsConnections) at the unit's LimitNOFILE=65536,
# in a 3 GiB guest: this host caps RLIMIT_NOFILE at 20,000. Slow under TCG;
# not part of vm-test-ci. See vm-tests/flood.py.
.PHONY: vm-test-flood
vm-test-flood:
	VM_MEMORY=3072 VM_GO_TESTS=./service/daemon $(MAKE) --no-print-directory vm-test VM_SCRIPTS=vm-tests/flood.py

vm-images:
	@set -e; for a in $(VM_ARCHS); do $(MAKE) --no-print-directory vm-image ARCH=$$a; done

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
	@missing=$$(for p in $(VM_APT_$(ARCH)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi
	vm-tests/image.sh $(ARCH) $(VM_WORK)/$(ARCH)

vm-clean:
	rm -rf vm-tests/.work
