#!/usr/bin/env bash
# make test's VM runs (vm-test-ci), in lanes that run side by side: each
# argument is a lane, the architectures it runs one after another, e.g.
#   ci.sh "amd64" "arm64 riscv64"
# Lanes are safe to run together: each run has its own network namespace
# (driver/run.py) and its own directory (VM_CI_WORK/ARCH-run), so they share
# only the CPU, which one lane left half idle. make test runs two lanes
# unless VM_CI_LANES=1 (mk/40-vm.mk). Measured times: vm-tests/README.md.
# Every line of a run is prefixed with its architecture. At the end, a recap
# names each architecture's verdict and repeats the end of every failed
# script's output (run.sh keeps it), so that a CI log's tail says what failed.
# env: VM_CI_WORK (images and runs), VM_SCRIPTS, VM_CI_AMD64_EXTRA (amd64's
# extra scripts), VM_LOCKED (the lock wrapper, may be empty), GO, VM_CI_RUN
# (what runs one architecture: run.sh; mk/make_test.go puts a stand-in there
# that keeps run.sh's files: ARCH-run/NAME.out and ARCH-run/failed).
# Exit 0 only if every architecture passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${VM_CI_WORK:?}" "${VM_SCRIPTS:?}"
VM_CI_AMD64_EXTRA=${VM_CI_AMD64_EXTRA:-}
VM_LOCKED=${VM_LOCKED:-}
RECAP_LINES=${RECAP_LINES:-40}
VM_CI_RUN=${VM_CI_RUN:-$HERE/run.sh}

# run_arch ARCH: one architecture's scripts; its exit status goes to
# ARCH-run/ci.rc (a lane goes on to its next architecture regardless).
run_arch() {
	local arch=$1 scripts=$VM_SCRIPTS
	[ "$arch" != amd64 ] || scripts="$scripts $VM_CI_AMD64_EXTRA"
	mkdir -p "$VM_CI_WORK/$arch-run"
	rm -f "$VM_CI_WORK/$arch-run/ci.rc" "$VM_CI_WORK/$arch-run/failed"
	# shellcheck disable=SC2086 # VM_LOCKED and scripts are word lists
	VM_WORK=$VM_CI_WORK $VM_LOCKED "$VM_CI_RUN" "$arch" $scripts 2>&1 |
		tee "$VM_CI_WORK/$arch-run/ci.log" | sed -u "s/^/[$arch] /"
	echo "${PIPESTATUS[0]}" >"$VM_CI_WORK/$arch-run/ci.rc"
}

lane() {
	local arch
	for arch in "$@"; do run_arch "$arch"; done
}

# recap ARCH: its verdict, and the end of each failed script's output (or
# of the whole run's, when it failed before any script: image, staging).
recap() {
	local arch=$1 rc name dir=$VM_CI_WORK/$1-run
	rc=$(cat "$dir/ci.rc" 2>/dev/null || echo "none (the lane was stopped)")
	if [ "$rc" = 0 ]; then
		echo "vm-test-ci: PASS: $arch"
		return 0
	fi
	echo "vm-test-ci: FAILED: $arch (exit $rc)"
	grep -h "^run.sh: $arch:" "$dir/ci.log" 2>/dev/null | tail -n 1
	if [ ! -s "$dir/failed" ]; then
		echo "---- $arch: the end of its run ($dir/ci.log)"
		tail -n "$RECAP_LINES" "$dir/ci.log" 2>/dev/null | sed "s/^/[$arch] /"
		return 1
	fi
	while read -r name; do
		echo "---- $arch: the end of $name ($dir/$name.out; logs in $dir/$name)"
		tail -n "$RECAP_LINES" "$dir/$name.out" | sed "s/^/[$arch] /"
	done <"$dir/failed"
	return 1
}

# The lanes' process groups (job control gives each its own), stopped if
# ci.sh is interrupted, so that no VM outlives an interrupted make test.
LANES=()
stop_lanes() {
	local pgid
	for pgid in "${LANES[@]}"; do kill -TERM -- "-$pgid" 2>/dev/null; done
	wait
}

main() {
	local lane_archs archs all=() pid arch rc=0
	set -m
	trap stop_lanes EXIT
	trap 'exit 143' TERM INT
	for lane_archs in "$@"; do
		[ -n "$lane_archs" ] || continue
		# shellcheck disable=SC2086 # a lane is a word list
		lane $lane_archs &
		LANES+=("$!")
		read -r -a archs <<<"$lane_archs"
		all+=("${archs[@]}")
	done
	for pid in "${LANES[@]}"; do wait "$pid"; done
	LANES=()
	echo "vm-test-ci: recap"
	for arch in "${all[@]}"; do recap "$arch" || rc=1; done
	[ "$rc" != 0 ] || echo "vm-test-ci: PASS: ${all[*]}"
	return "$rc"
}

main "$@"
