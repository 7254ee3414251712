#!/usr/bin/env bash
# Register qemu-user (qemu-user-static) for ARCH with binfmt_misc, so that
# debootstrap's second stage runs in a foreign-architecture chroot. The F
# flag opens the interpreter now, so it works inside the chroot too.
set -euo pipefail
ARCH=${1:?usage: binfmt.sh ARCH}
case $ARCH in
arm64) q=aarch64; magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
	mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' ;;
riscv64) q=riscv64; magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xf3\x00'
	mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' ;;
*) echo "binfmt.sh: no binfmt needed for $ARCH" >&2; exit 0 ;;
esac
[[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
for f in /proc/sys/fs/binfmt_misc/*; do
	if grep -qs "interpreter .*qemu-$q" "$f"; then
		grep -q '^flags:.*F' "$f" && exit 0
		echo -1 >"$f" # registered without F: re-register
	fi
done
echo ":vipproxy-qemu-$q:M::$magic:$mask:/usr/bin/qemu-$q-static:F" >/proc/sys/fs/binfmt_misc/register
