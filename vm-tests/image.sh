#!/usr/bin/env bash
# Build (or reuse) the Debian guest for the VM tests of one architecture:
#   OUT/kernel      the kernel qemu boots (uncompressed vmlinux on amd64: PVH
#                   boot skips the BIOS and the decompressor)
#   OUT/rootfs.ext4 debootstrap minbase + systemd, networkd, keepalived, ...
#   OUT/initrd-base busybox + the few modules needed to mount the root disk
#                   (initrd.sh adds the harness files from guest/ to it)
# Every VM boots the same rootfs with snapshot=on, so it is never modified.
# The cache is keyed by this file's hash: edit it, get a new image. The
# harness files (guest/) are not in the image: initrd.sh puts them into the
# initramfs, which copies them into the root at boot, so changing them costs
# a second, not a debootstrap.
#
# usage: image.sh [--check] ARCH OUT      (ARCH: amd64 | arm64 | riscv64)
#   --check: exit 0 if OUT holds the current image, 1 if it would be built
#
# The cache is shared (CI's background build and its tests, several
# checkouts on one machine), so an image is never changed in place: it is
# built in .ARCH.build beside OUT and renamed to ARCH.KEY, and OUT is a
# symlink to the current one, replaced by a rename. A reader sees the old
# complete image or the new one, never half of one; a build that fails or is
# killed leaves the previous image current. Builds of one ARCH take turns
# (.ARCH.lock): a second build waits for the first and then finds it done.
set -euo pipefail

CHECK=
if [[ ${1:-} == --check ]]; then
	CHECK=1
	shift
fi
ARCH=${1:?usage: image.sh ARCH OUT}
OUT=${2:?usage: image.sh ARCH OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT%/}
mkdir -p "$(dirname "$OUT")"
CACHE=$(cd "$(dirname "$OUT")" && pwd)
OUT=$CACHE/$(basename "$OUT")

case $ARCH in
amd64) SUITE=bookworm ;;
arm64) SUITE=bookworm ;;
riscv64) SUITE=trixie ;; # riscv64 is an official architecture from Debian 13 on
*) echo "image.sh: unknown ARCH $ARCH (amd64, arm64, riscv64)" >&2; exit 2 ;;
esac

# The packages the scenario uses inside the guest. Keep it small: every
# megabyte is paid for by debootstrap in CI on every run.
PACKAGES=systemd,systemd-sysv,udev,dbus,kmod,iproute2,keepalived,arping,ndisc6,nftables,curl,openssl,ca-certificates,procps,socat,iputils-ping,bird2,ifupdown

# The Debian mirror is the host's own (never a name hard-coded here).
mirror() {
	if [[ -n ${VM_MIRROR:-} ]]; then echo "$VM_MIRROR"; return; fi
	local m
	m=$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	[[ -z $m ]] && m=$(awk '$1=="deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	[[ -n $m ]] || { echo "image.sh: no Debian mirror found in /etc/apt; set VM_MIRROR" >&2; exit 1; }
	echo "$m"
}
MIRROR=$(mirror)

# apt for the guest architecture and suite, with its own state directory so
# the host's apt configuration is left alone (amd64 bookworm: the host's own).
APT_OPTS=()
if [[ $ARCH != amd64 || $SUITE != bookworm ]]; then
	d=$CACHE/.apt-$ARCH-$SUITE # not in the image: it is read before the key is known
	mkdir -p "$d/etc/apt.conf.d" "$d/etc/sources.list.d" "$d/etc/preferences.d" "$d/etc/trusted.gpg.d" "$d/state/lists/partial" "$d/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main" >"$d/etc/sources.list"
	touch "$d/state/status"
	APT_OPTS=(-o Dir::Etc="$d/etc" -o Dir::State="$d/state" -o Dir::State::status="$d/state/status"
		-o Dir::Cache="$d/cache" -o APT::Architecture="$ARCH" -o APT::Architectures="$ARCH" -o Debug::NoLocking=1)
fi

# One build of ARCH at a time in this cache; --check only reads the link.
if [[ -z $CHECK ]]; then
	exec 9>"$CACHE/.$ARCH.lock"
	flock 9
fi

# The kernel the mirror offers today, resolved with apt for the guest
# architecture (the index is refreshed in its own state directory).
[[ ${#APT_OPTS[@]} -gt 0 ]] && apt-get -qq "${APT_OPTS[@]}" update
kpkg=$(apt-cache "${APT_OPTS[@]}" depends "linux-image-$ARCH" | awk '/Depends: linux-image-/ {print $2; exit}')
[[ -n $kpkg ]] || { echo "image.sh: cannot resolve linux-image-$ARCH (apt-get update?)" >&2; exit 1; }
kver=$(apt-cache "${APT_OPTS[@]}" show --no-all-versions "$kpkg" | awk '/^Version:/ {print $2; exit}')

# The cache key: everything that goes into the image: these scripts (the
# package list and guest configuration are in image.sh), the suite, the
# architecture and the kernel package. A change of any of them, or a new
# kernel on the mirror, builds a new image; guest/ is not in the image.
key=$( (cd "$HERE" && cat image.sh binfmt.sh driver/extract_vmlinux.py; echo "$ARCH $SUITE $kpkg $kver") | sha256sum | cut -c1-16)
if [[ -f $OUT/stamp && $(cat "$OUT/stamp") == "$key" ]]; then
	echo "image.sh: $ARCH image up to date in $OUT ($SUITE, $kpkg $kver)"
	exit 0
fi
if [[ -n $CHECK ]]; then
	echo "image.sh: no current $ARCH image in $OUT ($SUITE, $kpkg $kver)"
	exit 1
fi

# Unmount whatever is mounted under DIR, deepest first. debootstrap's
# emulated second stage can leave the chroot's /proc mounted (trixie riscv64:
# mkfs.ext4 -d then fails on /proc/*/auxv), and rm -rf must never walk
# into a mounted /proc.
unmount_under() {
	local dir m
	[[ -d $1 ]] || return 0
	dir=$(cd "$1" && pwd -P)
	awk -v d="$dir/" 'index($2 "/", d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}

# The build directory: a killed build's leftovers go first (the lock says
# no other build uses it), and go again on any exit.
# publish DIR NAME: DIR becomes CACHE/NAME and OUT points to it (rename,
# then a symlink renamed over OUT); older images of ARCH are removed (a VM
# still running from one keeps its open files).
publish() {
	local old
	rm -rf "${CACHE:?}/$2"
	mv -T "$1" "$CACHE/$2"
	[[ -L $OUT || ! -e $OUT ]] || rm -rf "$OUT" # a directory: the layout before links
	ln -sfn "$2" "$CACHE/.$ARCH.link"
	mv -T "$CACHE/.$ARCH.link" "$OUT"
	for old in "$CACHE/$ARCH".*; do
		[[ $old == "$CACHE/$2" || ! -f $old/stamp ]] || rm -rf "$old"
	done
}

WORK=$CACHE/.$ARCH.build
cleanup() { unmount_under "$WORK"; rm -rf "$WORK"; }
cleanup
trap cleanup EXIT
trap 'exit 143' TERM INT HUP # run the EXIT trap when make test is stopped
mkdir -p "$WORK"
t0=$SECONDS
log() { echo "image.sh[$ARCH +$((SECONDS - t0))s]: $*"; }

log "kernel $kpkg $kver and busybox from $SUITE/$ARCH"
(cd "$WORK" && apt-get -q "${APT_OPTS[@]}" download "$kpkg" busybox-static 2>&1 | grep -v 'unsandboxed' || true)
ls "$WORK"/linux-image-*.deb "$WORK"/busybox-static_*.deb >/dev/null
chmod 644 "$WORK"/*.deb
mkdir -p "$WORK/k" "$WORK/bb"
dpkg-deb -x "$WORK"/linux-image-*.deb "$WORK/k"
dpkg-deb -x "$WORK"/busybox-static_*.deb "$WORK/bb"
# Debian 13 ships modules in /usr/lib/modules (merged /usr).
[[ -d $WORK/k/lib/modules ]] || ln -s usr/lib "$WORK/k/lib"
KVER=$(ls "$WORK/k/lib/modules" | head -1)
log "kernel $KVER"

# Kernel image. amd64: the uncompressed ELF inside the bzImage, for PVH boot.
vmlinuz=$(compgen -G "$WORK/k/boot/vmlinuz-*" || compgen -G "$WORK/k/boot/vmlinux-*" || true) # riscv64: vmlinux
[[ -n $vmlinuz ]] || { echo "image.sh: no kernel image in $kpkg" >&2; exit 1; }
if [[ $ARCH == amd64 ]]; then
	python3 "$HERE/driver/extract_vmlinux.py" "$vmlinuz" "$WORK/kernel"
else
	cp "$vmlinuz" "$WORK/kernel"
fi

# The modules the initramfs needs to mount the root disk. Module files may
# be compressed (trixie: .ko.xz); busybox insmod wants them plain.
depmod -b "$WORK/k" "$KVER"
mkdir -p "$WORK/initrd/lib/modules" "$WORK/initrd/bin" "$WORK/initrd/newroot" "$WORK/initrd/proc" "$WORK/initrd/sys" "$WORK/initrd/dev"
: >"$WORK/initrd/modules.order"
# virtio_console: /dev/hvc0 (the backdoor) exists before systemd starts,
# however slow udev is on a loaded host.
for m in virtio_pci virtio_mmio virtio_blk virtio_console crc32c_generic ext4; do
	modprobe -d "$WORK/k" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
	base=$(basename "$ko")
	case $ko in
	*.xz) xz -dc "$ko" >"$WORK/initrd/lib/modules/${base%.xz}"; base=${base%.xz} ;;
	*.zst) zstd -qdc "$ko" >"$WORK/initrd/lib/modules/${base%.zst}"; base=${base%.zst} ;;
	*) cp "$ko" "$WORK/initrd/lib/modules/$base" ;;
	esac
	echo "$base" >>"$WORK/initrd/modules.order"
done
cp "$(compgen -G "$WORK/bb/bin/busybox" || compgen -G "$WORK/bb/usr/bin/busybox")" "$WORK/initrd/bin/busybox" # trixie: /usr/bin

# Root filesystem. Foreign architectures: first stage here, second stage in
# the chroot through qemu-user (binfmt_misc).
log "debootstrap $SUITE/$ARCH ($PACKAGES)"
ROOT=$WORK/root
if [[ $ARCH == amd64 ]]; then
	debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
		{ tail -30 "$WORK/debootstrap.log"; exit 1; }
else
	"$HERE/binfmt.sh" "$ARCH"
	debootstrap --foreign --arch="$ARCH" --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
		{ tail -30 "$WORK/debootstrap.log"; exit 1; }
	log "debootstrap second stage (emulated)"
	chroot "$ROOT" /debootstrap/debootstrap --second-stage >>"$WORK/debootstrap.log" 2>&1 ||
		{ tail -30 "$WORK/debootstrap.log"; exit 1; }
fi

log "configure the guest"
# Kernel modules the guest loads itself (dummy, veth, nftables, ...): the
# whole tree minus hardware the VM never has.
mkdir -p "$ROOT/lib/modules"
cp -a "$WORK/k/lib/modules/$KVER" "$ROOT/lib/modules/"
for d in drivers/gpu drivers/media drivers/infiniband drivers/net/wireless drivers/net/ethernet drivers/scsi \
	drivers/usb drivers/staging drivers/bluetooth drivers/iio drivers/hid drivers/input drivers/isdn \
	drivers/mtd drivers/thunderbolt drivers/nvme drivers/md drivers/target drivers/video sound net/bluetooth \
	net/wireless net/mac80211 fs/btrfs fs/xfs fs/ocfs2 fs/nfs fs/nfsd fs/gfs2 fs/ceph fs/smb fs/cifs; do
	rm -rf "$ROOT/lib/modules/$KVER/kernel/$d"
done
depmod -b "$ROOT" "$KVER"
chroot "$ROOT" /bin/sh -e <<'EOF'
# Nothing here needs a password; the backdoor is the only way in.
passwd -d root >/dev/null
systemctl enable systemd-networkd.service >/dev/null 2>&1
# keepalived is started by the test, with the config vipproxy renders.
systemctl disable keepalived.service >/dev/null 2>&1 || true
rm -f /etc/machine-id /var/lib/dbus/machine-id
: > /etc/machine-id
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man /usr/share/locale /var/cache/debconf/*-old
EOF

log "mkfs.ext4"
unmount_under "$ROOT"
IMG=$WORK/image
mkdir -p "$IMG"
mkfs.ext4 -q -F -O ^has_journal -L vmroot -d "$ROOT" "$IMG/rootfs.ext4" 1200M
mv "$WORK/kernel" "$IMG/kernel"
mv "$WORK/initrd" "$IMG/initrd-base"
echo "$KVER" >"$IMG/kver"
echo "$key" >"$IMG/stamp"
publish "$IMG" "$ARCH.$key"
log "done: $OUT -> $ARCH.$key"
