# VM tests: the ARP/hairpin scenario on Debian VMs under qemu (TCG), driven
# by NixOS-test-style scripts (vm-tests/*.py; the same scripts run in
# runNixOSTest, see vm-tests/nixos.nix). Needs root (network namespace,
# taps); skips cleanly without. Every ARCH runs the one-node smoke and the
# four-VM scenario (in make test, the scenario's steps that are the same on
# every architecture on amd64 only: vm-tests/ci.sh). See vm-tests/README.md.
ARCH ?= amd64
# The architectures make test proves. Every one by default; a caller who
# cannot or will not run some says so here, e.g. `make test VM_ARCHS=amd64`
# (the others are reported SKIPPED), or VM_ARCHS= for none.
VM_ALL_ARCHS := amd64 arm64 riscv64
VM_ARCHS ?= $(VM_ALL_ARCHS)
# The longest first: vm-test-ci's queue (vm-tests/ci.sh) starts them in
# this order, and short runs at the end keep both workers busy to it.
VM_SCRIPTS ?= vm-tests/scenario.py vm-tests/smoke.py
# Images and runs: vm-tests/.work by default; make test keeps its images in
# VM_CI_WORK, a cache keyed by everything that goes into them (image.sh):
# a speed-up only, built there when missing or stale.
VM_WORK ?= $(CURDIR)/vm-tests/.work
VM_CI_WORK ?= /var/cache/vipproxy-vm
export VM_WORK
# VM_LOCK=FILE: every image build and VM run holds this lock (flock) while
# it runs, so that people sharing a machine take turns (vm-tests/locked.sh).
VM_LOCK ?=
VM_LOCKED := $(if $(VM_LOCK),vm-tests/locked.sh $(VM_LOCK))
# Packages the guest side needs on the host, per architecture: make deps
# installs those of VM_ARCHS.
VM_APT_amd64 := qemu-system-x86
VM_APT_arm64 := qemu-system-arm qemu-user-static
VM_APT_riscv64 := qemu-system-misc opensbi qemu-user-static
APT_PACKAGES += $(foreach a,$(VM_ARCHS),$(VM_APT_$(a))) debootstrap e2fsprogs iproute2 cpio kmod xz-utils zstd python3 ca-certificates pyflakes3 util-linux
# What the scripts may use without defining it (pyflakes must know it): the
# NixOS driver's globals and the names vm-tests/prelude.py defines (it runs
# before each script).
VM_PRELUDE_NAMES := $(shell sed -n -E 's/^([A-Z_]+) =.*/\1/p; s/^def ([a-z_]+).*/\1/p' vm-tests/prelude.py | paste -sd, -)
VM_PYFLAKES_BUILTINS := start_all,subtest,machines,driver,client,cp1,cp2,cp3,router,$(VM_PRELUDE_NAMES)

# CI (make test): smoke and scenario on every architecture of VM_ARCHS, so a
# green run means each was proven. The images are built in the background
# as make test starts (vm-images-ci: one after the other, in the order the
# runs need them, while the Go tests run); each run waits for its image
# (image.sh's lock), and builds it itself if the background build failed.
# A machine that cannot run VMs (vm-tests/can-run.sh) fails vm-test-ci with
# NOT COVERED, unless VM_ARCHS says to skip. Measured times: vm-tests/README.md.
# Both are registered in mk/90-vm-ci.mk, so that vm-test-ci runs last.
# On amd64 only, since they test the install and its neighbours, not the
# architecture: the README's Debian quick start followed verbatim on one
# fresh node (~1 min); the NixOS-shaped twin: doctor and keepalived's probe
# as NixOS runs them (~1 min); the neighbours: CNI rules and routes kept by
# networkd, upgrades under load with 0 failed and 0 refused (~4 min); the
# .deb: installed, upgraded, downgraded and reinstalled under load, a
# refused config, removed and purged (~7 min; two make release builds
# staged); the check's credentials through LoadCredential= across a reboot
# (~2 min); beside the operator's own networkd, apply refuses rather than
# cost them (~1 min). The longest first, so that the short ones fill the
# queue's end.
VM_CI_AMD64_EXTRA ?= vm-tests/package.py vm-tests/neighbours.py vm-tests/credentials.py vm-tests/quickstart.py vm-tests/nixos-twin.py vm-tests/networkd-foreign.py

# Two runs side by side by default (vm-tests/ci.sh): one queue of runs (an
# architecture and a script each) that two workers take from in turn. A run
# under TCG keeps about one of the two cores busy, so one at a time left a
# core idle for 40 minutes of a fresh run, and a lane per list of
# architectures (amd64 beside arm64 then riscv64, until 2026-12-04) for the
# last 8. VM_CI_LANES=1 runs one at a time. Two were not the default before
# 2026-12-02: arm64's smoke lost its first connection beside amd64's run, a
# daemon fault since fixed (TestLastResortStreamKeptUntilAnotherIsUp).
VM_CI_LANES ?= 2
# The scripts whose runs never go beside each other (ci.sh): the scenario
# boots four guests, and two of them at once (eight TCG guests on two
# cores) starved the guests until a VRRP master gave up the VIP.
VM_CI_ALONE ?= vm-tests/scenario.py

.PHONY: vm-test-ci vm-images-ci vm-archs-known vm-test-all vm-images
vm-test-ci: vm-archs-known vm-lint
	@for a in $(filter-out $(VM_ARCHS),$(VM_ALL_ARCHS)); do \
		echo "vm-test-ci: SKIPPED: $$a (VM_ARCHS=$(VM_ARCHS))"; done; \
	if ! why=$$(vm-tests/can-run.sh); then \
		for a in $(VM_ARCHS); do echo "vm-test-ci: NOT COVERED: $$a ($$why; VM_ARCHS=... to skip it)"; done; \
		exit 1; fi; \
	[ -n "$(VM_ARCHS)" ] || { echo "vm-test-ci: PASS: none"; exit 0; }; \
	VM_CI_WORK=$(VM_CI_WORK) VM_SCRIPTS="$(VM_SCRIPTS)" VM_CI_AMD64_EXTRA="$(VM_CI_AMD64_EXTRA)" VM_CI_ALONE="$(VM_CI_ALONE)" \
		VM_LOCKED="$(VM_LOCKED)" VM_CI_LANES="$(VM_CI_LANES)" GO=$(GO) vm-tests/ci.sh $(VM_ARCHS)

# make test starts this in the background (niced): the images vm-test-ci
# will boot. The first architecture's (the first run needs it) is built
# first, then the others side by side: much of a build from nothing is
# downloading packages, which then overlap (on 2026-12-02 the riscv64
# image, built after arm64's, was ready only after the VM runs began;
# side by side on a quiet machine both took 312 s). Their qemu-user
# handlers are registered first, so the builds do not race to mount
# binfmt_misc.
# A failed build is only reported here: vm-test-ci builds it again in the
# foreground and fails there with the reason.
vm-images-ci: vm-archs-known
	@vm-tests/can-run.sh >/dev/null || exit 0; \
	build() { $(VM_LOCKED) vm-tests/image.sh $$1 $(VM_CI_WORK)/$$1 || echo "vm-images-ci: $$1: build failed (exit $$?)"; }; \
	for a in $(wordlist 2,99,$(VM_ARCHS)); do vm-tests/binfmt.sh $$a >/dev/null || true; done; \
	$(if $(VM_ARCHS),build $(firstword $(VM_ARCHS));) \
	for a in $(wordlist 2,99,$(VM_ARCHS)); do build $$a & done; wait

vm-archs-known:
	@$(if $(VM_ARCHES),echo "VM_ARCHES is not a variable here: VM_ARCHS is"; exit 2;) \
	$(if $(filter-out $(VM_ALL_ARCHS),$(VM_ARCHS)),echo "VM_ARCHS: unknown $(filter-out $(VM_ALL_ARCHS),$(VM_ARCHS)) (known: $(VM_ALL_ARCHS))"; exit 2;) true

# Every architecture, full scenario (about 45 min with images built from
# nothing on the 2-core machine; see vm-tests/README.md), and on each the
# scripts of VM_ALL_EXTRA: the .deb, which is built per architecture and
# installed on that architecture's Debian (13 on riscv64), so make test's
# amd64 run does not prove the others.
VM_ALL_EXTRA ?= vm-tests/package.py
vm-test-all: vm-archs-known
	@rc=0; for a in $(VM_ARCHS); do \
		$(MAKE) --no-print-directory vm-test ARCH=$$a VM_SCRIPTS="$(VM_SCRIPTS) $(VM_ALL_EXTRA)" || rc=1; done; exit $$rc

# The fd flood (TestFloodKeepsConnections) at the unit's LimitNOFILE=65536,
# in a 3 GiB guest with 2 vCPUs: this host caps RLIMIT_NOFILE at 20,000.
# The three stand-in apiservers run natively on this host (VM_FLOOD_STANDIN),
# not in the guest. Slow under TCG; not part of vm-test-ci. See
# vm-tests/flood.py.
VM_FLOOD_SMP ?= 2
.PHONY: vm-test-flood
vm-test-flood:
	$(GO) build -o $(VM_WORK)/flood-host/ ./cmd/vipproxy-apiserver
	VM_FLOOD_STANDIN=$(VM_WORK)/flood-host/vipproxy-apiserver VM_SMP=$(VM_FLOOD_SMP) VM_MEMORY=3072 VM_GO_TESTS=./service/daemon \
		$(MAKE) --no-print-directory vm-test VM_SCRIPTS=vm-tests/flood.py

# BGP mode: three nodes announcing the VIP through BIRD to a
# router with ECMP, SIGKILL and restart under a client loop. See
# vm-tests/bgp.py and docs/bgp.md.
.PHONY: vm-test-bgp
vm-test-bgp:
	$(MAKE) --no-print-directory vm-test VM_SCRIPTS=vm-tests/bgp.py

# A restart and a binary upgrade of vipproxy.service under 1,000 watches
# and a loop of new connections through the VIP: 0 cut, 0 failed, the
# delay of new connections measured. Not in vm-test-ci: under TCG the
# guest completes about 5 mTLS handshakes a second on a loaded host, so the
# 1,000 watches alone take minutes to start. See vm-tests/handover.py.
.PHONY: vm-test-handover
vm-test-handover:
	$(MAKE) --no-print-directory vm-test VM_SCRIPTS=vm-tests/handover.py

vm-images: vm-archs-known
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
	cd vm-tests/driver && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -q test_vmtest

vm-test: vm-lint
	@if ! why=$$(vm-tests/can-run.sh); then echo "vm-test: SKIP ($$why)"; exit 0; fi; \
	missing=$$(for p in $(VM_APT_$(ARCH)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi; \
	GO=$(GO) $(VM_LOCKED) vm-tests/run.sh $(ARCH) $(VM_SCRIPTS)

vm-image:
	@missing=$$(for p in $(VM_APT_$(ARCH)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi
	$(VM_LOCKED) vm-tests/image.sh $(ARCH) $(VM_WORK)/$(ARCH)

vm-clean:
	rm -rf vm-tests/.work
