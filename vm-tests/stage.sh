#!/usr/bin/env bash
# Stage what the guests get from this checkout, as a small ext4 image that
# every VM mounts read-only at /opt/vipproxy (the initramfs runs its
# install.sh before systemd starts, so the units are there at first load):
#   bin/      every cmd/* built for the guest (CGO_ENABLED=0, GOARCH=ARCH)
#   systemd/  the repository's unit files, installed to /etc/systemd/system
# usage: stage.sh ARCH OUT.ext4
set -euo pipefail
ARCH=${1:?usage: stage.sh ARCH OUT.ext4}
OUT=${2:?usage: stage.sh ARCH OUT.ext4}
HERE=$(cd "$(dirname "$0")" && pwd)
# VM_SRC: build from another checkout (e.g. a `git archive` of HEAD).
REPO=$(cd "${VM_SRC:-$HERE/..}" && pwd)
GO=${GO:-go}
DIR=$(dirname "$OUT")/opt
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/systemd"
VERSION=$(cd "$REPO" && git describe --tags --always --dirty 2>/dev/null || echo dev)
(cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH $GO build -trimpath -tags nethttpomithttp2 \
	-ldflags "-s -w -X main.version=$VERSION" -o "$DIR/bin/" ./cmd/...)
if compgen -G "$REPO/systemd/*.s*" >/dev/null; then
	cp "$REPO"/systemd/*.socket "$REPO"/systemd/*.service "$DIR/systemd/" 2>/dev/null || true
fi
cat >"$DIR/install.sh" <<'INSTALL'
#!/bin/sh
# Runs in the initramfs (busybox) with the guest root as $1.
set -e
R=$1
cp $R/opt/vipproxy/bin/* "$R/usr/bin/"
for u in $R/opt/vipproxy/systemd/*; do
	[ -e "$u" ] && cp "$u" "$R/etc/systemd/system/"
done
mkdir -p "$R/etc/vipproxy"
exit 0
INSTALL
chmod 755 "$DIR/install.sh"
size=$(( $(du -sm "$DIR" | cut -f1) + 16 ))
mkfs.ext4 -q -F -O ^has_journal -L vipproxy -d "$DIR" "$OUT" "${size}M"
echo "stage.sh: $ARCH: $(ls "$DIR/bin" | tr '\n' ' ')units: $(ls "$DIR/systemd" | tr '\n' ' ')-> $OUT (${size} MiB)"
