#!/usr/bin/env bash
# Can this machine run the VM tests? They need root (taps, a private network
# namespace), /dev/net/tun and network namespaces. Exit 0 if so; otherwise
# print what is missing and exit 1. The one place that decides it: vm-test
# skips on 1 (a developer's machine), vm-test-ci fails (CI must prove them).
missing=()
[[ $(id -u) == 0 ]] || missing+=("root")
[[ -c /dev/net/tun ]] || missing+=("/dev/net/tun")
if [[ $(id -u) == 0 ]] && ! unshare --net true 2>/dev/null; then
	missing+=("network namespaces (unshare --net)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
	echo "needs ${missing[*]}"
	exit 1
fi
