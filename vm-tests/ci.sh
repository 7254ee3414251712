#!/usr/bin/env bash
# make test's VM runs (vm-test-ci): every script on every architecture given,
#   ci.sh amd64 arm64 riscv64
# as one queue of runs (one architecture, one script: a run.sh each) that
# VM_CI_LANES workers (default 2) take from in turn, so that both cores stay
# busy to the end: with a lane per architecture list, amd64's lane ended
# 480 s before arm64's and riscv64's on a fresh machine (2026-12-04) and
# left a core idle. The queue takes the first script of every architecture,
# then amd64's extra scripts, then every architecture's second script, and
# so on: make lists the longest first (the scenario), so that the short
# runs fill the end; with the smokes first and the extras last, the two
# workers ended 440 s apart (2026-12-05). The runs of VM_CI_ALONE's scripts
# (the scenario: four guests) never go beside each other: the first worker
# takes them one after the other, then helps with the rest, which the
# other workers take meanwhile. Two scenarios at once put eight TCG guests
# on the 2-core machine; in a fresh run of 45ba384 (2026-12-06) the guests
# stood still for seconds, the VRRP master's health checks timed out
# against its own apiserver, and the VIP moved away and back under a
# request loop. Every architecture but amd64
# runs with VM_SKIP_ARCH_NEUTRAL=1: a script leaves out its steps that test
# nothing the architecture changes (scenario.py's 10 and 11), which amd64
# runs. Runs are safe together, two of one architecture too:
# each has its own network namespace (driver/run.py), its own logs
# (VM_CI_WORK/ARCH-run/NAME) and its own staged binaries (run.sh), so they
# share only the CPU. Measured times: vm-tests/README.md.
# Every line of a run is prefixed with its architecture. At the end, a recap
# names each architecture's verdict and repeats the end of every failed
# run's output (ARCH-run/NAME.ci.log), so that a CI log's tail says what failed.
# env: VM_CI_WORK (images and runs), VM_SCRIPTS, VM_CI_AMD64_EXTRA (amd64's
# extra scripts), VM_CI_ALONE (scripts whose runs go one at a time, may
# be empty), VM_CI_LANES, VM_LOCKED (the lock wrapper, may be empty),
# GO, VM_CI_RUN (what runs one architecture's scripts: run.sh; mk/make_test.go
# puts a stand-in there).
# Exit 0 only if every run passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${VM_CI_WORK:?}" "${VM_SCRIPTS:?}"
VM_CI_AMD64_EXTRA=${VM_CI_AMD64_EXTRA:-}
VM_CI_LANES=${VM_CI_LANES:-2}
VM_CI_ALONE=${VM_CI_ALONE:-}
VM_LOCKED=${VM_LOCKED:-}
RECAP_LINES=${RECAP_LINES:-40}
VM_CI_RUN=${VM_CI_RUN:-$HERE/run.sh}
# The architecture that runs amd64's extra scripts and every step of a
# script (the others skip the architecture-neutral ones): the host's.
FULL=amd64

# scripts_of ARCH: its scripts, one a line.
scripts_of() {
	local s
	# shellcheck disable=SC2086 # word lists
	for s in $VM_SCRIPTS $([ "$1" != "$FULL" ] || echo $VM_CI_AMD64_EXTRA); do echo "$s"; done
}

# The queue, "ARCH SCRIPT" a line: every architecture's first script,
# amd64's extras, then every second script...
queue() {
	local i=1 arch s more=1
	while [ -n "$more" ]; do
		more=
		for arch in "$@"; do
			# shellcheck disable=SC2086 # a word list
			s=$(printf '%s\n' $VM_SCRIPTS | sed -n "${i}p")
			[ -z "$s" ] || { echo "$arch $s"; more=1; }
		done
		if [ "$i" = 1 ] && [[ " $* " == *" $FULL "* ]]; then
			# shellcheck disable=SC2086 # a word list
			for s in $VM_CI_AMD64_EXTRA; do echo "$FULL $s"; done
		fi
		i=$((i + 1))
	done
}

# take QUEUE: the number of QUEUE's next run (from 1), counted in a file
# under a lock, since the workers are separate processes.
take() {
	local n
	{
		flock 9
		n=$(($(cat "$STATE/$1.next" 2>/dev/null || echo 0) + 1))
		echo "$n" >"$STATE/$1.next"
	} 9>>"$STATE/lock"
	echo "$n"
}

# alone SCRIPT: whether SCRIPT's runs go one at a time (VM_CI_ALONE).
alone() {
	local s
	# shellcheck disable=SC2086 # a word list
	for s in $VM_CI_ALONE; do [ "$(basename "$s")" != "$(basename "$1")" ] || return 0; done
	return 1
}

# run_file ARCH SCRIPT SUFFIX: a file of that run, VM_CI_WORK/ARCH-run/NAME.SUFFIX.
run_file() {
	echo "$VM_CI_WORK/$1-run/$(basename "$2" .py).$3"
}

# run_one ARCH SCRIPT: one run; its output (prefixed) to the log, its
# whole output to ARCH-run/NAME.ci.log, its exit status to ARCH-run/NAME.rc.
run_one() {
	local arch=$1 script=$2
	mkdir -p "$VM_CI_WORK/$arch-run"
	# shellcheck disable=SC2086 # VM_LOCKED is a word list
	VM_WORK=$VM_CI_WORK VM_SKIP_ARCH_NEUTRAL=$([ "$arch" = "$FULL" ] || echo 1) \
		$VM_LOCKED "$VM_CI_RUN" "$arch" "$script" 2>&1 |
		tee "$(run_file "$arch" "$script" ci.log)" | sed -u "s/^/[$arch] /"
	echo "${PIPESTATUS[0]}" >"$(run_file "$arch" "$script" rc)"
}

# worker QUEUE...: takes the runs of each QUEUE in turn until none is left.
worker() {
	local q n arch script
	for q in "$@"; do
		while n=$(take "$q") && read -r arch script < <(sed -n "${n}p" "$STATE/$q") && [ -n "$arch" ]; do
			run_one "$arch" "$script"
		done
	done
}

# recap ARCH: its verdict, and for each failed run the end of its output.
recap() {
	local arch=$1 script name rc log failed=()
	while read -r script; do
		rc=$(cat "$(run_file "$arch" "$script" rc)" 2>/dev/null || echo "none: stopped")
		[ "$rc" = 0 ] || failed+=("$(basename "$script" .py)")
	done < <(scripts_of "$arch")
	if [ "${#failed[@]}" = 0 ]; then
		echo "vm-test-ci: PASS: $arch"
		return 0
	fi
	echo "vm-test-ci: FAILED: $arch (${failed[*]})"
	for name in "${failed[@]}"; do
		log=$(run_file "$arch" "$name" ci.log)
		echo "---- $arch: the end of $name ($log; logs in ${log%.ci.log})"
		tail -n "$RECAP_LINES" "$log" 2>/dev/null | sed "s/^/[$arch] /"
	done
	return 1
}

# The workers' process groups (job control gives each its own), stopped if
# ci.sh is interrupted, so that no VM outlives an interrupted make test.
WORKERS=()
STATE=
stop_workers() {
	local pgid
	for pgid in "${WORKERS[@]}"; do kill -TERM -- "-$pgid" 2>/dev/null; done
	wait
	[ -z "$STATE" ] || rm -rf "$STATE"
}

main() {
	local i arch script rc=0
	case $VM_CI_LANES in '' | *[!0-9]* | 0) echo "ci.sh: VM_CI_LANES=$VM_CI_LANES: want a count from 1" >&2; return 2 ;; esac
	set -m
	trap stop_workers EXIT
	trap 'exit 143' TERM INT
	STATE=$(mktemp -d)
	queue "$@" >"$STATE/queue"
	# Two queues in that order: the runs that go one at a time, which only
	# the first worker takes, and the shared ones.
	: >"$STATE/alone"
	: >"$STATE/shared"
	while read -r arch script; do
		if alone "$script"; then echo "$arch $script" >>"$STATE/alone"; else echo "$arch $script" >>"$STATE/shared"; fi
	done <"$STATE/queue"
	# A run stopped before it began leaves no verdict, not an older one.
	while read -r arch script; do
		rm -f "$(run_file "$arch" "$script" ci.log)" "$(run_file "$arch" "$script" rc)"
	done <"$STATE/queue"
	worker alone shared &
	WORKERS+=("$!")
	for ((i = 1; i < VM_CI_LANES; i++)); do
		worker shared &
		WORKERS+=("$!")
	done
	for i in "${WORKERS[@]}"; do wait "$i"; done
	WORKERS=()
	echo "vm-test-ci: recap"
	while read -r arch script; do
		grep -h "^run.sh: $arch:" "$(run_file "$arch" "$script" ci.log)" 2>/dev/null
	done <"$STATE/queue"
	for arch in "$@"; do recap "$arch" || rc=1; done
	[ "$rc" != 0 ] || echo "vm-test-ci: PASS: $*"
	return "$rc"
}

main "$@"
