#!/usr/bin/env bash
# Make OUT/initrd from OUT/initrd-base (image.sh) plus the harness files:
# guest/init and guest/rootfs/ (copied into the root filesystem at boot:
# the backdoor shell and its unit, the eth1 naming, volatile journald).
# usage: initrd.sh OUT
set -euo pipefail
OUT=${1:?usage: initrd.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T" "${new:-}"' EXIT
cp -a "$OUT/initrd-base/." "$T/"
cp "$HERE/guest/init" "$T/init"
cp "$HERE/guest/masks" "$T/masks"
chmod 755 "$T/init"
mkdir -p "$T/overlay"
cp -a "$HERE/guest/rootfs/." "$T/overlay/"
# Written aside and renamed: runs of one architecture may start side by
# side (ci.sh), and one must not boot the initrd another is writing.
new=$(mktemp "$OUT/initrd.XXXXXX")
(cd "$T" && find . | cpio -o -H newc --quiet | gzip -1) >"$new"
chmod 644 "$new"
mv "$new" "$OUT/initrd"
