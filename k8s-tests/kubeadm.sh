#!/bin/bash
# kubeadm.sh KUBEADM: docs/distributions.md's kubeadm recipe rendered by the
# real kubeadm (make k8s-apiserver builds it beside kube-apiserver), for the
# three control-plane nodes of examples/kubeadm.toml (192.0.2.11-13):
#
#   cp1: kubeadm init phase control-plane apiserver, examples/kubeadm/init.yaml
#   cp2, cp3: kubeadm join, examples/kubeadm/join.yaml, with --dry-run: there
#        is no cluster to join, so kubeadm answers its own API reads (with
#        a cluster-info of its own) and its phases write to
#        KUBEADM_JOIN_DRYRUN_DIR, control-plane-prepare's control-plane the
#        manifests. (`kubeadm join phase control-plane-prepare control-plane`
#        alone wants the admin.conf of an earlier phase, which only a
#        cluster gives.)
#   each: kubeadm upgrade node phase control-plane and kubeadm upgrade apply
#        (to the same version), examples/kubeadm/upgrade.yaml, with
#        --dry-run: kubeadm reads the node's apiserver manifest and a
#        kubeadm-config of its own and prints the manifests it regenerates
#
# each node with the patches directory of examples/kubeadm/patches holding
# its own address, as the recipe installs it. Every kube-apiserver manifest
# must bind the node's own address (one --bind-address, no 0.0.0.0), and
# advertise and probe it. cp1 once more with the docs' authentication-config
# block (docs/distributions.md#readiness-without-credentials) added to its
# ClusterConfiguration: the flag, the file mounted read-only, no
# --anonymous-auth. Each node is a directory kubeadm chroots into
# (--rootfs), its /etc/kubernetes the node's, and a network namespace of its
# own holding the node's address (kubeadm wants an interface with one): the
# dry runs try the API servers they are told of before answering
# themselves, and those dials fail there at once, reaching nothing. Nothing
# of the host's is read or written. Needs root (chroot, unshare).
set -euo pipefail
kubeadm=$(readlink -f "${1:?usage: kubeadm.sh KUBEADM}")
repo=$(cd "$(dirname "$0")/.." && pwd)
ex=$repo/examples/kubeadm
started=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (kubeadm --rootfs chroots)" >&2; exit 1; }
work=$(mktemp -d /tmp/vipproxy-kubeadm.XXXXXX)
trap 'rm -rf "$work"' EXIT

step() { echo "[$(($(date +%s) - started))s] $*"; }
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# node_setup NODE IP: the node's root with the recipe's files installed:
# the patch with this node's address (the shipped file names cp1's
# 192.0.2.11), the configs under /etc/kubernetes as the recipe names them.
node_setup() {
	local root=$work/$1
	mkdir -p "$root/etc/kubernetes/patches" "$root/etc/kubernetes/manifests" "$root/tmp" "$root/out"
	sed "s/192\.0\.2\.11/$2/" "$ex/patches/kube-apiserver0+json.yaml" >"$root/etc/kubernetes/patches/kube-apiserver0+json.yaml"
	cp "$ex/init.yaml" "$root/etc/kubernetes/kubeadm-init.yaml"
	sed "s/192\.0\.2\.12/$2/" "$ex/join.yaml" >"$root/etc/kubernetes/kubeadm-join.yaml"
	cp "$ex/upgrade.yaml" "$root/etc/kubernetes/kubeadm-upgrade.yaml"
}

# kadm NODE ARG...: kubeadm chrooted into NODE's root, in a network
# namespace whose one link (a veth, its peer beside it) has the node's
# address as a /32 (no route to anything else), its output in
# $work/NODE.log (and on stdout).
kadm() {
	local node=$1 ip
	shift
	ip=${node_ip[$node]}
	echo "+ kubeadm $*" >>"$work/$node.log"
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --net sh -ec 'ip link add eth0 type veth peer name eth0peer
		ip addr add "$1/32" dev eth0
		ip link set eth0 up && ip link set eth0peer up && ip link set lo up
		shift
		exec "$@"' sh "$ip" "$kubeadm" --rootfs "$work/$node" "$@" 2>>"$work/$node.log" | tee -a "$work/$node.log" ||
		fail "$node: kubeadm $* failed: $(tail -20 "$work/$node.log")"
}
declare -A node_ip=([cp1]=192.0.2.11 [cp2]=192.0.2.12 [cp3]=192.0.2.13)

# dryrun_manifest: the kube-apiserver manifest in kubeadm --dry-run's
# output on stdin ("[dryrun] Would write file ... with content:", at the
# end of a line when kubeadm printed something before it without a
# newline, then the file up to the next "[" line).
dryrun_manifest() {
	awk '/\[dryrun\] Would write file "\/etc\/kubernetes\/manifests\/kube-apiserver.yaml" with content:$/ {f=1; next} /^\[/ {f=0} f'
}

# assert_binds FILE IP WHAT: the apiserver binds IP alone: one
# --bind-address, IP's, and no wildcard address in the manifest.
assert_binds() {
	local file=$1 ip=$2 what=$3 binds
	[ -s "$file" ] || fail "$what: no kube-apiserver manifest"
	binds=$(grep -c -- '^    - --bind-address=' "$file" || true)
	[ "$binds" = 1 ] || fail "$what: $binds --bind-address flags, want 1: $(grep -- '--bind-address' "$file" || true)"
	grep -qx -- "    - --bind-address=$ip" "$file" || fail "$what: $(grep -- '--bind-address' "$file"), want --bind-address=$ip"
	! grep -q '0\.0\.0\.0\|\[::\]' "$file" || fail "$what: a wildcard address: $(grep '0\.0\.0\.0\|\[::\]' "$file")"
}
# assert_manifest FILE IP WHAT: the apiserver binds, advertises and is
# probed on IP alone.
assert_manifest() {
	local file=$1 ip=$2 what=$3
	assert_binds "$file" "$ip" "$what"
	grep -qx -- "    - --advertise-address=$ip" "$file" || fail "$what: advertise-address is not $ip"
	grep -qx -- "    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: $ip:6443" "$file" ||
		fail "$what: the endpoint annotation is not $ip:6443"
	[ "$(grep -c -- "^        host: $ip\$" "$file")" = 3 ] || fail "$what: the three probes do not all use host $ip"
	step "$what: --bind-address=$ip (1 flag), advertised and probed on $ip, no wildcard"
}

# upgrade NODE IP: the manifests kubeadm upgrade would write on NODE. A
# dry run without a cluster takes the advertise address from kubeadm's own
# stand-in for the node's apiserver pod (0.0.0.0, so kubeadm picks the
# address of an interface); on a node it is the pod's, the node's own. The
# bind address comes from the node's patch either way: that is checked.
upgrade() {
	local node=$1 ip=$2
	KUBEADM_UPGRADE_DRYRUN_DIR=/out kadm "$node" upgrade node phase control-plane --config /etc/kubernetes/kubeadm-upgrade.yaml --dry-run |
		dryrun_manifest >"$work/$node-upgrade-node.yaml"
	assert_binds "$work/$node-upgrade-node.yaml" "$ip" "$node: kubeadm upgrade node phase control-plane"
	step "$node: kubeadm upgrade node phase control-plane: --bind-address=$ip (1 flag), no wildcard"
	# (Preflight inspects the host: a chroot has no /proc or modprobe.)
	KUBEADM_UPGRADE_DRYRUN_DIR=/out kadm "$node" upgrade apply "$("$kubeadm" version -o short)" --config /etc/kubernetes/kubeadm-upgrade.yaml \
		--dry-run --yes --ignore-preflight-errors=all |
		dryrun_manifest >"$work/$node-upgrade-apply.yaml"
	assert_binds "$work/$node-upgrade-apply.yaml" "$ip" "$node: kubeadm upgrade apply"
	step "$node: kubeadm upgrade apply: --bind-address=$ip (1 flag), no wildcard"
}

step "kubeadm $("$kubeadm" version -o short), three control-plane nodes in $work"
node_setup cp1 192.0.2.11
kadm cp1 init phase control-plane apiserver --config /etc/kubernetes/kubeadm-init.yaml >/dev/null
assert_manifest "$work/cp1/etc/kubernetes/manifests/kube-apiserver.yaml" 192.0.2.11 "cp1: kubeadm init phase control-plane apiserver"

# The hardened variant of docs/distributions.md#readiness-without-credentials:
# cp1's ClusterConfiguration with the docs' authentication-config block.
node_setup cp1-hardened 192.0.2.11
node_ip[cp1-hardened]=192.0.2.11
awk '/<!-- kubeadm-authentication-config -->/ {f=1; next} /<!-- end kubeadm-authentication-config -->/ {f=0} f && !/```/ {sub(/^  /, ""); print}' \
	"$repo/docs/distributions.md" >>"$work/cp1-hardened/etc/kubernetes/kubeadm-init.yaml"
kadm cp1-hardened init phase control-plane apiserver --config /etc/kubernetes/kubeadm-init.yaml >/dev/null
hardened=$work/cp1-hardened/etc/kubernetes/manifests/kube-apiserver.yaml
assert_manifest "$hardened" 192.0.2.11 "cp1, the docs' authentication-config: kubeadm init phase control-plane apiserver"
grep -qx -- '    - --authentication-config=/etc/kubernetes/authentication-config.yaml' "$hardened" &&
	grep -A2 -x -- '    - mountPath: /etc/kubernetes/authentication-config.yaml' "$hardened" | grep -qx -- '      readOnly: true' &&
	grep -qx -- '      path: /etc/kubernetes/authentication-config.yaml' "$hardened" &&
	! grep -q -- '--anonymous-auth' "$hardened" ||
	fail "the docs' authentication-config block: no --authentication-config with its file mounted, or an --anonymous-auth: $(grep -n 'authentication\|anonymous' "$hardened")"
step "cp1, the docs' authentication-config: --authentication-config, its file mounted read-only, no --anonymous-auth"

for n in 2 3; do
	node_setup "cp$n" "192.0.2.1$n"
	KUBEADM_JOIN_DRYRUN_DIR=/out kadm "cp$n" join --config /etc/kubernetes/kubeadm-join.yaml --dry-run --ignore-preflight-errors=all >/dev/null
	assert_manifest "$work/cp$n/out/kube-apiserver.yaml" "192.0.2.1$n" "cp$n: kubeadm join (its control-plane-prepare control-plane phase)"
	# The node as the join leaves it: its apiserver's manifest in place.
	cp "$work/cp$n/out/kube-apiserver.yaml" "$work/cp$n/etc/kubernetes/manifests/"
done

for n in 1 2 3; do upgrade "cp$n" "192.0.2.1$n"; done
echo "PASS: kubeadm recipe, 3 nodes: init, join, upgrade node, upgrade apply ($(($(date +%s) - started))s)"
