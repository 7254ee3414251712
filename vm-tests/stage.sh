#!/usr/bin/env bash
# Stage what the guests get from this checkout, as a small ext4 image that
# every VM mounts read-only at /opt/vipproxy (the initramfs runs its
# install.sh before systemd starts, so the units are there at first load):
#   bin/      every cmd/* built for the guest (CGO_ENABLED=0, GOARCH=ARCH);
#             they stay there, read-only, as in a NixOS store path: nothing
#             goes to /usr/bin, so a rendered file or unit that assumes
#             /usr/bin/vipproxy fails here as it would on NixOS
#   systemd/  the repository's unit files with /usr/bin/vipproxy replaced by
#             that prefix (as vm-tests/nixos.nix does with the store path),
#             installed to /etc/systemd/system
# usage: stage.sh ARCH OUT.ext4
set -euo pipefail
ARCH=${1:?usage: stage.sh ARCH OUT.ext4}
OUT=${2:?usage: stage.sh ARCH OUT.ext4}
HERE=$(cd "$(dirname "$0")" && pwd)
# VM_SRC: build from another checkout (e.g. a `git archive` of HEAD).
REPO=$(cd "${VM_SRC:-$HERE/..}" && pwd)
GO=${GO:-go}
# The tree to stage, its own directory: runs may stage side by side (ci.sh).
DIR=$(mktemp -d "$(dirname "$OUT")/opt.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
chmod 755 "$DIR" # mkfs.ext4 -d gives the root of the file system its mode
mkdir -p "$DIR/bin" "$DIR/systemd"
# As the Makefile's build: the version and commit git gives (none: the
# binary says "version unknown (built without git metadata)").
VERSION=$(cd "$REPO" && git describe --tags --always --dirty 2>/dev/null || true)
COMMIT=$(cd "$REPO" && git rev-parse HEAD 2>/dev/null || true)
(cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH $GO build -trimpath -tags nethttpomithttp2 \
	-ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" -o "$DIR/bin/" ./cmd/...)
# upgrade/: with VM_STAGE_UPGRADE=1 (run.sh sets it for a script with a
# `# stage: upgrade` line), vipproxy built again from the same source with
# another version stamped (VERSION-upgrade): a different build to install
# over the running one, as a package upgrade does.
if [ -n "${VM_STAGE_UPGRADE:-}" ]; then
	mkdir -p "$DIR/upgrade"
	(cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH $GO build -trimpath -tags nethttpomithttp2 \
		-ldflags "-s -w -X main.version=${VERSION:-unknown}-upgrade -X main.commit=$COMMIT" -o "$DIR/upgrade/" ./cmd/vipproxy)
fi
# tests/: Go test binaries of the packages in VM_GO_TESTS (e.g.
# ./service/daemon for flood.py), run in a guest where a limit or a kernel
# feature of this host is in the way; they find the binaries above through
# VIPPROXY_TEST_BIN.
for pkg in ${VM_GO_TESTS:-}; do
	mkdir -p "$DIR/tests"
	(cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH $GO test -c -o "$DIR/tests/$(basename "$pkg").test" "$pkg")
done
# debs/: with VM_STAGE_DEBS="0.1.0 0.1.1" (run.sh sets it for a script
# with a `# stage: debs` line), the .deb of each of those versions for the
# guest, as `make release` builds it (vipproxy_VERSION-1_ARCH.deb).
for v in ${VM_STAGE_DEBS:-}; do
	mkdir -p "$DIR/debs"
	make -s -C "$REPO" --no-print-directory release VERSION="$v" RELEASE_ARCHS="$ARCH" DIST="$DIR/release-$v" GO="$GO" >/dev/null
	mv "$DIR/release-$v"/*.deb "$DIR/debs/"
	rm -rf "$DIR/release-$v"
done
PREFIX=/opt/vipproxy
if compgen -G "$REPO/systemd/*.s*" >/dev/null; then
	cp "$REPO"/systemd/*.socket "$REPO"/systemd/*.service "$DIR/systemd/" 2>/dev/null || true
	sed -i "s|/usr/bin/vipproxy|$PREFIX/bin/vipproxy|g" "$DIR"/systemd/*
	if grep -n /usr/bin/vipproxy "$DIR"/systemd/*; then
		echo "stage.sh: a unit still names /usr/bin/vipproxy" >&2
		exit 1
	fi
fi
cat >"$DIR/install.sh" <<'INSTALL'
#!/bin/sh
# Runs in the initramfs (busybox) with the guest root as $1.
set -e
R=$1
# No copy to /usr/bin: the binaries stay under /opt/vipproxy/bin (read-only),
# which only the test driver's shell has in its PATH (vm-backdoor), as
# /run/current-system/sw/bin on NixOS.
for u in $R/opt/vipproxy/systemd/*; do
	[ -e "$u" ] && cp "$u" "$R/etc/systemd/system/"
done
mkdir -p "$R/etc/vipproxy"
exit 0
INSTALL
chmod 755 "$DIR/install.sh"
size=$(( $(du -sm "$DIR" | cut -f1) + 16 ))
mkfs.ext4 -q -F -O ^has_journal -L vipproxy -d "$DIR" "$OUT" "${size}M"
[ ! -d "$DIR/debs" ] || echo "stage.sh: $ARCH: debs: $(ls "$DIR/debs" | tr '\n' ' ')"
echo "stage.sh: $ARCH: $(ls "$DIR/bin" | tr '\n' ' ')units: $(ls "$DIR/systemd" | tr '\n' ' ')-> $OUT (${size} MiB)"
