#!/usr/bin/env bash
# build-deb.sh: the vipproxy .deb of one architecture, from a staged tree,
# with dpkg-deb (no source package, no debhelper: the maintainer scripts
# beside this file carry dh_installsystemd's blocks, adapted; see postinst).
# usage: build-deb.sh VERSION ARCH BINARY OUTDIR [MANPAGE...]
#   VERSION  what the binary reports (`git describe`: v0.1.0, v0.1.0-3-gabc1234,
#            0.1.0, or a bare commit); the Debian version is derived from it
#   ARCH     Debian architecture (amd64, arm64, riscv64: GOARCH's names)
#   BINARY   the static vipproxy for ARCH
#   MANPAGE  man pages to install (vipproxy.8, vipproxy.toml.5): section from the name
# env: SOURCE_DATE_EPOCH (default: the last commit's time) for every mtime
# and the changelog date; DEB_MAINTAINER.
set -euo pipefail
VERSION=${1:?usage: build-deb.sh VERSION ARCH BINARY OUTDIR [MANPAGE...]}
ARCH=${2:?}
BINARY=${3:?}
OUTDIR=${4:?}
shift 4
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MAINTAINER=${DEB_MAINTAINER:-vipproxy maintainers <maintainers@users.noreply.a-seed-d78572ee.example>}
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}

# debian_version VERSION: the upstream version with Debian revision 1.
# v0.1.0 -> 0.1.0-1; v0.1.0-3-gabc1234 -> 0.1.0+3.gabc1234-1 (sorts after
# 0.1.0, before 0.1.1); a bare commit abc1234 -> 0~gabc1234-1 (before any
# release); -dirty -> +dirty.
debian_version() {
	local v=${1#v}
	v=${v//-dirty/+dirty}
	if [[ $v =~ ^[0-9a-f]{7,40}(\+dirty)?$ ]]; then
		v="0~g$v"
	elif [[ $v =~ ^([0-9][0-9A-Za-z.~+]*)-([0-9]+)-g([0-9a-f]+)(.*)$ ]]; then
		v="${BASH_REMATCH[1]}+${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}${BASH_REMATCH[4]}"
	elif [[ ! $v =~ ^[0-9] ]]; then
		v="0~g$v"
	fi
	[[ $v =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || { echo "build-deb.sh: cannot make a Debian version of $1" >&2; exit 1; }
	echo "$v-1"
}
DEBVER=$(debian_version "$VERSION")

[ -x "$BINARY" ] || { echo "build-deb.sh: $BINARY is not an executable" >&2; exit 1; }
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
DOC=$ROOT/usr/share/doc/vipproxy
install -d "$ROOT/DEBIAN" "$ROOT/usr/bin" "$ROOT/lib/systemd/system" "$ROOT/etc/vipproxy" \
	"$DOC/examples" "$ROOT/usr/share/vipproxy/monitoring" "$ROOT/usr/share/lintian/overrides"
install -m755 "$BINARY" "$ROOT/usr/bin/vipproxy"
install -m644 "$REPO"/systemd/*.service "$REPO"/systemd/*.socket "$ROOT/lib/systemd/system/"
install -m644 "$REPO/examples/vipproxy.toml" "$ROOT/etc/vipproxy/vipproxy.toml"
# examples/ with its folders (kubeadm/ and its patches, credentials/).
(cd "$REPO/examples" && find . -type f | LC_ALL=C sort) | while read -r f; do
	install -D -m644 "$REPO/examples/$f" "$DOC/examples/$f"
done
install -m644 "$REPO"/monitoring/* "$ROOT/usr/share/vipproxy/monitoring/"
install -m644 "$REPO/README.md" "$DOC/README.md"
install -m644 "$HERE/copyright" "$DOC/copyright"
if [ -f "$REPO/CHANGELOG.md" ]; then
	install -m644 "$REPO/CHANGELOG.md" "$DOC/changelog"
	gzip -9n "$DOC/changelog"
fi
for page in "$@"; do
	section=${page##*.}
	install -D -m644 "$page" "$ROOT/usr/share/man/man$section/$(basename "$page")"
	gzip -9n "$ROOT/usr/share/man/man$section/$(basename "$page")"
done
install -m644 "$HERE/lintian-overrides" "$ROOT/usr/share/lintian/overrides/vipproxy"
cat >"$DOC/changelog.Debian" <<CHANGELOG
vipproxy ($DEBVER) unstable; urgency=medium

  * Release $VERSION (vipproxy version: $VERSION).

 -- $MAINTAINER  $(date -u -R -d "@$EPOCH")
CHANGELOG
gzip -9n "$DOC/changelog.Debian"

install -m755 "$HERE/postinst" "$HERE/prerm" "$HERE/postrm" "$ROOT/DEBIAN/"
echo /etc/vipproxy/vipproxy.toml >"$ROOT/DEBIAN/conffiles"
cat >"$ROOT/DEBIAN/control" <<CONTROL
Package: vipproxy
Version: $DEBVER
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
Depends: systemd
Recommends: keepalived
Suggests: bird2
Section: net
Priority: optional
Homepage: https://github.com/vipproxy/vipproxy
Description: socket-activated TCP load balancer for the Kubernetes apiserver VIP
 vipproxy listens on the control-plane VIP on every node (systemd owns the
 listening socket, so a restart of the daemon refuses no connection),
 balances TCP connections over the apiservers with health checks and
 transparent retry, and sets the host up so that only the node holding the
 VIP answers ARP for it, without breaking pod hairpin traffic.
 .
 keepalived moves the VIP between the control-plane nodes (vip.mode =
 "vrrp", the default, hence recommended); BIRD announces it by BGP instead
 (vip.mode = "bgp"); worker nodes serving a loopback VIP need neither.
 vipproxy renders their configuration.
CONTROL
(cd "$ROOT" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
	xargs -0 md5sum >DEBIAN/md5sums)
chmod 644 "$ROOT/DEBIAN/md5sums" "$ROOT/DEBIAN/control" "$ROOT/DEBIAN/conffiles"
find "$ROOT" -type d -exec chmod 755 {} +
find "$ROOT" -exec touch -h -d "@$EPOCH" {} +
mkdir -p "$OUTDIR"
out="$OUTDIR/vipproxy_${DEBVER}_$ARCH.deb"
SOURCE_DATE_EPOCH=$EPOCH dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$out" >/dev/null
echo "$out"
