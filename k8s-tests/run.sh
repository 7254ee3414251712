#!/bin/bash
# run.sh VIPPROXY KUBE_APISERVER [SCENARIO...]: vipproxy against three real
# kube-apiservers, one scenario after another on the same cluster.
#
# lib.sh starts the cluster (network namespace, PKI, etcd, apiservers) and
# holds the helpers; each scenarios/NAME.sh defines scenario_NAME (a name
# with - written _). Without SCENARIO arguments (or K8S_SCENARIOS) every
# scenario runs, in file name order. A scenario starts its own vipproxy,
# stops it, and leaves the cluster whole (cluster_whole) for the next.
set -euo pipefail
vipproxy=$(readlink -f "${1:?usage: run.sh VIPPROXY KUBE_APISERVER [SCENARIO...]}")
apiserver=$(readlink -f "${2:?usage: run.sh VIPPROXY KUBE_APISERVER [SCENARIO...]}")
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
# kubectl (need_kubectl): $KUBECTL, else the one beside kube-apiserver,
# else PATH's.
kubectl=${KUBECTL:-$(dirname "$apiserver")/kubectl}
[ -x "$kubectl" ] || kubectl=$(command -v kubectl || true)
[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (ip netns)" >&2; exit 1; }
command -v etcd >/dev/null || { echo "FAIL: no etcd (apt-get install etcd-server)" >&2; exit 1; }

# shellcheck source=k8s-tests/lib.sh
. "$repo/k8s-tests/lib.sh"
all=()
for f in "$repo"/k8s-tests/scenarios/*.sh; do
	# shellcheck disable=SC1090
	. "$f"
	all+=("$(basename "$f" .sh)")
done
# shellcheck disable=SC2206 # a space-separated list from make
wanted=(${@:-${K8S_SCENARIOS:-${all[*]}}})
for s in "${wanted[@]}"; do
	declare -F "scenario_${s//-/_}" >/dev/null || fail "no scenario $s (have: ${all[*]})"
done

work=$(mktemp -d /tmp/vipproxy-k8s.XXXXXX)
ns=vipproxy-k8s-$$
trap cleanup EXIT
netns_setup
pki_setup
cluster_start
for s in "${wanted[@]}"; do
	swork=$work/$s credentials=
	mkdir -p "$swork"
	step "scenario $s"
	"scenario_${s//-/_}"
	vipproxy_stop
	cluster_whole
	step "PASS: scenario $s"
done
echo "PASS: make test-k8s ${wanted[*]} ($(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - started))s)"
