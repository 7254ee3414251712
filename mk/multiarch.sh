#!/usr/bin/env bash
# test-multiarch's run for one architecture: go test of the given packages
# under qemu-user, then once more for the packages that failed. qemu-user
# (Debian 12's 7.2) can leave a child of a program with threads stuck
# between fork and exec, which nothing of ours causes: a CI clone,
# 2026-12-02 17:37 UTC, arm64: service/keepalived's
# TestGoldenPassesKeepalivedConfigTest hung in os/exec's forkExec (reading
# the child's exec pipe) until go test's timeout; the same package passes
# in 2 s. A package that fails twice fails the run; one that passes the
# second time is named, so a flaky test of ours still shows.
#
# usage: GO=go MULTIARCH_TIMEOUT=5m mk/multiarch.sh GOARCH QEMU PKG...
set -u
goarch=$1 qemu=$2
shift 2
run() {
	CGO_ENABLED=0 GOARCH=$goarch VIPPROXY_QEMU_USER=$qemu ${GO:-go} test -count=1 \
		-timeout "${MULTIARCH_TIMEOUT:-5m}" -exec "$qemu" "$@"
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run "$@" 2>&1 | tee "$out"
[ "${PIPESTATUS[0]}" = 0 ] && exit 0
# go test ends a failed package's output with "FAIL<tab>PACKAGE<tab>TIME"
# (or "[build failed]"); the lone "FAIL" at the end is not one.
failed=$(sed -n 's/^FAIL\t\([^[:space:]]*\).*/\1/p' "$out" | sort -u | tr '\n' ' ')
if [ -z "$failed" ]; then
	exit 1
fi
echo "test-multiarch: $goarch: once more, the packages that failed: $failed"
# shellcheck disable=SC2086 # one word per package
if run $failed; then
	echo "test-multiarch: $goarch: passed the second time: $failed(their first failure is above)"
	exit 0
fi
exit 1
