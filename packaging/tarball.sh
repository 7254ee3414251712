#!/usr/bin/env bash
# tarball.sh: the release tarball of one architecture,
# vipproxy-VERSION-linux-ARCH.tar.gz, reproducible (sorted names, one mtime,
# root-owned, gzip -n), holding one directory of the same name:
#   vipproxy            the static binary
#   VERSION             the version it reports
#   systemd/            the units (install to /etc/systemd/system or /lib/systemd/system)
#   examples/ monitoring/ man/   as in the repository; man/ from `make man`
#   LICENSE README.md [CHANGELOG.md]
# usage: tarball.sh VERSION ARCH BINARY OUTDIR [MANPAGE...]
# env: SOURCE_DATE_EPOCH (default: the last commit's time).
set -euo pipefail
VERSION=${1:?usage: tarball.sh VERSION ARCH BINARY OUTDIR [MANPAGE...]}
ARCH=${2:?}
BINARY=${3:?}
OUTDIR=${4:?}
shift 4
REPO=$(cd "$(dirname "$0")/.." && pwd)
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}
NAME=vipproxy-${VERSION#v}-linux-$ARCH
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
D=$TMP/$NAME
install -d "$D/systemd" "$D/examples" "$D/monitoring"
install -m755 "$BINARY" "$D/vipproxy"
echo "$VERSION" >"$D/VERSION"
install -m644 "$REPO"/systemd/*.service "$REPO"/systemd/*.socket "$D/systemd/"
# examples/ with its folders (kubeadm/ and its patches, credentials/).
(cd "$REPO/examples" && find . -type f | LC_ALL=C sort) | while read -r f; do
	install -D -m644 "$REPO/examples/$f" "$D/examples/$f"
done
install -m644 "$REPO"/monitoring/* "$D/monitoring/"
install -m644 "$REPO/LICENSE" "$REPO/README.md" "$D/"
[ ! -f "$REPO/CHANGELOG.md" ] || install -m644 "$REPO/CHANGELOG.md" "$D/"
if [ $# -gt 0 ]; then
	install -d "$D/man"
	install -m644 "$@" "$D/man/"
fi
mkdir -p "$OUTDIR"
tar -C "$TMP" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
	-cf - "$NAME" | gzip -9n >"$OUTDIR/$NAME.tar.gz"
echo "$OUTDIR/$NAME.tar.gz"
