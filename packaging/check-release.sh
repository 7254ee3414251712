#!/usr/bin/env bash
# check-release.sh DIST VERSION COMMIT ARCH...: what `make release` put in
# DIST is what a user gets: per architecture a tarball with the static
# binary, whose `vipproxy version` names VERSION and COMMIT, and everything
# listed in tarball.sh, its man pages rendered by man(1) without a warning
# (as `man ./vipproxy.8` shows them); a .deb that
# lintian passes (errors and warnings; packaging/debian/lintian-overrides
# says why for each tag it overrides) holding that same binary, the units,
# the conffile and the man pages the tarball has; SHA256SUMS over them all.
# Foreign binaries run under qemu-user (qemu-user-static).
set -euo pipefail
DIST=${1:?usage: check-release.sh DIST VERSION COMMIT ARCH...}
VERSION=${2:?}
# A release names its commit: one built without git metadata or a VERSION
# file says "commit: unknown", which this refuses.
COMMIT=${3:?check-release: no commit (a release is built from git or from a tree with a VERSION file)}
shift 3
GO=${GO:-go}
fail() { echo "check-release: $*" >&2; exit 1; }
declare -A QEMU=([arm64]=qemu-aarch64-static [riscv64]=qemu-riscv64-static)
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match $DIST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arch in "$@"; do
	name=vipproxy-${VERSION#v}-linux-$arch
	tgz=$DIST/$name.tar.gz
	grep -q " $name.tar.gz\$" "$DIST/SHA256SUMS" || fail "$name.tar.gz is not in SHA256SUMS"
	mkdir "$tmp/$arch"
	tar -C "$tmp/$arch" -xzf "$tgz"
	t=$tmp/$arch/$name
	for f in vipproxy VERSION LICENSE README.md systemd/vipproxy.service systemd/vipproxy.socket \
		systemd/vipproxy-port@.socket systemd/vipproxy-network.service systemd/vipproxy-announce.service \
		examples/vipproxy.toml monitoring/vipproxy-alerts.yml; do
		[ -e "$t/$f" ] || fail "$tgz has no $name/$f"
	done
	[ "$(cat "$t/VERSION")" = "$VERSION" ] || fail "$tgz: VERSION says $(cat "$t/VERSION"), not $VERSION"
	for other in vipproxy-apiserver vipproxy-bench vipproxy-demo; do
		[ ! -e "$t/$other" ] || fail "$tgz ships $other (test tooling)"
	done
	settings=$($GO version -m "$t/vipproxy")
	grep -q "GOARCH=$arch\$" <<<"$settings" || fail "$tgz: vipproxy is not built for $arch"
	grep -q "CGO_ENABLED=0\$" <<<"$settings" || fail "$tgz: vipproxy is not static (CGO_ENABLED=0)"
	out=$(${QEMU[$arch]:-} "$t/vipproxy" version 2>&1) || fail "$tgz: vipproxy version: $out"
	grep -qF -- "${VERSION#v}" <<<"$out" || fail "$tgz: vipproxy version prints '$out', not $VERSION"
	grep -qx -- "commit: $COMMIT" <<<"$out" || fail "$tgz: vipproxy version prints '$out', not commit $COMMIT"
	for m in "$t"/man/*; do
		[ -e "$m" ] || continue
		warn=$(MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null) || fail "$tgz: man -l $(basename "$m") failed: $warn"
		[ -z "$warn" ] || fail "$tgz: man --warnings -l $(basename "$m") warns: $warn"
	done
	debs=("$DIST"/vipproxy_*_"$arch".deb)
	[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "not one .deb for $arch in $DIST: ${debs[*]}"
	deb=${debs[0]}
	grep -q " $(basename "$deb")\$" "$DIST/SHA256SUMS" || fail "$(basename "$deb") is not in SHA256SUMS"
	lintian --fail-on error,warning "$deb" || fail "lintian: $deb"
	dpkg-deb -x "$deb" "$tmp/$arch/deb"
	cmp -s "$tmp/$arch/deb/usr/bin/vipproxy" "$t/vipproxy" || fail "$deb: /usr/bin/vipproxy differs from the tarball's"
	for u in "$t"/systemd/*; do
		cmp -s "$u" "$tmp/$arch/deb/lib/systemd/system/$(basename "$u")" || fail "$deb: /lib/systemd/system/$(basename "$u") differs"
	done
	for m in "$t"/man/*; do
		[ -e "$m" ] || continue
		[ -f "$tmp/$arch/deb/usr/share/man/man${m##*.}/$(basename "$m").gz" ] || fail "$deb has no man page $(basename "$m")"
	done
	dpkg-deb -f "$deb" Architecture | grep -qx "$arch" || fail "$deb: Architecture is not $arch"
	dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles | grep -qx /etc/vipproxy/vipproxy.toml ||
		fail "$deb: /etc/vipproxy/vipproxy.toml is not a conffile"
	echo "check-release: $arch: $(basename "$tgz") ($(tar -tzf "$tgz" | wc -l) entries), $(basename "$deb") (lintian clean), vipproxy version: $(head -n 1 <<<"$out")"
done
