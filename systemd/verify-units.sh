#!/bin/bash
# verify-units.sh BIN [MAX_EXPOSURE]: checks the shipped units with Debian's
# systemd: `systemd-analyze verify` on all of them and the offline security
# score of vipproxy.service, which must not exceed MAX_EXPOSURE (1.5).
# verify needs every ExecStart= binary to exist, so it runs on copies whose
# /usr/bin/vipproxy points at the freshly built BIN.
# The commands the units run must exist in this binary: each is run with --help.
set -euo pipefail
bin=$(readlink -f "$1")
max=${2:-1.5}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$bin" ] || { echo "verify-units: $bin is not an executable" >&2; exit 1; }

cp "$here"/*.socket "$here"/*.service "$tmp"/
sed -i "s#/usr/bin/vipproxy#$bin#g" "$tmp"/*.service "$tmp"/*.socket
# The sockets are verified with the drop-ins `vipproxy units write` renders
# (every option they set, vip.reuse_port's ReusePort= among them), the
# port template (vipproxy-port@.socket, which ships no ListenStream=) as
# instance "i".
cat >"$tmp/units.toml" <<'TOML'
[vip]
addresses = ["127.0.0.1"]
reuse_port = true
[[port]]
name = "api"
port = 6443
[[port]]
name = "i"
port = 8132
[[backend]]
address = "192.0.2.1"
[network]
uplinks = ["eth0"]
TOML
"$bin" units write --config "$tmp/units.toml" --root "$tmp/root" >/dev/null
cp -r "$tmp/root/etc/systemd/system/vipproxy.socket.d" "$tmp/root/etc/systemd/system/vipproxy-port@i.socket.d" "$tmp/"
grep -qx 'ReusePort=yes' "$tmp/vipproxy-port@i.socket.d/50-listen.conf" || { echo "verify-units: vipproxy units write rendered no ReusePort=yes for vip.reuse_port" >&2; exit 1; }
# verify prints warnings on stderr and still exits 0: treat any output as failure.
out=$(cd "$tmp" && systemd-analyze verify ./*.socket ./*.service 2>&1) || { echo "$out" >&2; exit 1; }
if [ -n "$out" ]; then echo "systemd-analyze verify complained:" >&2; echo "$out" >&2; exit 1; fi
for sub in $(sed -n 's#^Exec[A-Za-z]*=[-+!@:]*[^ ]*/vipproxy \([a-z]*\).*#\1#p' "$here"/*.socket "$here"/*.service | sort -u); do
	"$bin" "$sub" --help >/dev/null || { echo "verify-units: the units run 'vipproxy $sub', which $bin does not know" >&2; exit 1; }
done
# A package upgrade restarts vipproxy-network.service: its stop must leave
# the VIP on dummyvip0 (docs/operations.md#upgrades).
if grep -n '^ExecStop.*network remove' "$here/vipproxy-network.service"; then
	echo "verify-units: vipproxy-network.service takes the VIP off when it stops or restarts (an upgrade would cut local connections)" >&2
	exit 1
fi
echo "systemd-analyze verify: ok ($(cd "$tmp" && ls ./*.socket ./*.service | xargs -n1 basename | tr '\n' ' '))"

fail=0
for unit in vipproxy.service vipproxy-network.service vipproxy-announce.service; do
	level=$(systemd-analyze security --offline=true "$tmp/$unit" 2>&1 |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	[ -n "$level" ] || { echo "no exposure level for $unit" >&2; exit 1; }
	echo "systemd-analyze security --offline=true $unit: exposure $level"
	if [ "$unit" = vipproxy.service ] && awk -v l="$level" -v m="$max" 'BEGIN { exit !(l > m) }'; then
		echo "FAIL: $unit exposure $level is above $max" >&2
		systemd-analyze security --offline=true "$tmp/$unit" | grep '✗' >&2
		fail=1
	fi
done
exit $fail
