#!/bin/bash
# run.sh VIPPROXY KUBE_APISERVER: vipproxy against three real kube-apiservers.
#
# In a private network namespace (traffic never leaves it), with TEST-NET
# addresses on its lo (an apiserver keeps loopback addresses out of its own
# EndpointSlice): Debian's etcd on 127.0.0.1, apiservers on 192.0.2.1-3
# (default lease endpoint reconciler), the VIP on 192.0.2.10. vipproxy is
# seeded with 192.0.2.1 only and must: discover .2 and .3 through the
# `kubernetes` EndpointSlice with the least RBAC (examples/rbac-discovery.yaml),
# route to all three, and drop .3 once it is SIGKILLed and its lease expires,
# with a request loop running and no failed request.
set -euo pipefail
vipproxy=$(readlink -f "${1:?usage: run.sh VIPPROXY KUBE_APISERVER}")
apiserver=$(readlink -f "${2:?usage: run.sh VIPPROXY KUBE_APISERVER}")
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "FAIL: needs root (ip netns)" >&2; exit 1; }
command -v etcd >/dev/null || { echo "FAIL: no etcd (apt-get install etcd-server)" >&2; exit 1; }

work=$(mktemp -d /tmp/vipproxy-k8s.XXXXXX)
ns=vipproxy-k8s-$$
pids=()
started=$(date +%s)
cleanup() {
	rc=$?
	touch "$work/stop"
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	if [ $rc != 0 ]; then
		for f in "$work"/*.log; do echo "=== tail $f"; tail -n 25 "$f"; done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
in_ns() { ip netns exec "$ns" "$@"; }
step() { echo "[$(($(date +%s) - started))s] $*"; }
# waitfor SECONDS WHAT CMD...: poll every 0.5 s, bounded.
waitfor() {
	local limit=$1 what=$2
	shift 2
	for _ in $(seq $((limit * 2))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	echo "FAIL: timed out after ${limit}s waiting for $what" >&2
	exit 1
}

step "network namespace $ns, TEST-NET addresses on lo"
ip netns add "$ns"
ip -n "$ns" link set lo up
for i in 1 2 3 10; do ip -n "$ns" addr add "192.0.2.$i/32" dev lo; done
# An uplink for the config (an IPv4 VIP needs one); nothing uses it here.
ip -n "$ns" link add eth1 type veth peer name eth1peer
ip -n "$ns" link set eth1 up

step "PKI"
pki=$work/pki
mkdir -p "$pki"
ossl() { openssl "$@" >/dev/null 2>&1; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj /CN=vipproxy-k8s-test-ca -days 2
leaf() {
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2"
	printf '%b\n' "$3" >"$pki/$1.ext"
	ossl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -out "$pki/$1.crt" -days 2 -extfile "$pki/$1.ext"
}
leaf apiserver /CN=kube-apiserver "subjectAltName=IP:192.0.2.1,IP:192.0.2.2,IP:192.0.2.3,IP:192.0.2.10,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth"
leaf admin "/O=system:masters/CN=admin" "extendedKeyUsage=clientAuth"
leaf vipproxy "/CN=vipproxy" "extendedKeyUsage=clientAuth"
ossl genrsa -out "$pki/sa.key" 2048
ossl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

step "etcd $(etcd --version | head -1)"
ip netns exec "$ns" etcd --name default --data-dir "$work/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster default=http://127.0.0.1:2380 >"$work/etcd.log" 2>&1 &
pids+=($!)
waitfor 60 "etcd" in_ns curl -sf http://127.0.0.1:2379/health

api_pid=()
for i in 1 2 3; do
	ip netns exec "$ns" "$apiserver" --etcd-servers=http://127.0.0.1:2379 \
		--advertise-address="192.0.2.$i" --bind-address="192.0.2.$i" --secure-port=6443 \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
		--authorization-mode=RBAC --endpoint-reconciler-type=lease --enable-priority-and-fairness=false \
		--cert-dir="$work/cert$i" >"$work/apiserver$i.log" 2>&1 &
	pids+=($!)
	api_pid[$i]=$!
done
# A build from the module proxy has no version stamped in: name the cache's.
step "three kube-apiservers ($(basename "$(dirname "$apiserver")"), module k8s.io/kubernetes) starting"
for i in 1 2 3; do
	waitfor 300 "apiserver $i /readyz" in_ns curl -sf --cacert "$pki/ca.crt" "https://192.0.2.$i:6443/readyz"
done
step "apiservers ready"

kc() { in_ns curl -sS --fail-with-body --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"; }
slice_url="https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes"
slice_addrs() { kc "$slice_url" | jq -r '[.items[].endpoints[] | select(.conditions.ready != false) | .addresses[]] | sort | join(" ")'; }
slice_is() { [ "$(slice_addrs)" = "$1" ]; }
waitfor 120 "the kubernetes EndpointSlice to list all three" slice_is "192.0.2.1 192.0.2.2 192.0.2.3"
step "EndpointSlice: $(slice_addrs)"

# The least RBAC, from the manifest in the repo: one POST per document.
awk -v dir="$work" '/^---$/ {n++; next} {print > (dir "/rbac" n+0 ".yaml")}' "$repo/examples/rbac-discovery.yaml"
kc -o /dev/null -H 'Content-Type: application/yaml' --data-binary @"$work/rbac0.yaml" \
	https://192.0.2.1:6443/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles
kc -o /dev/null -H 'Content-Type: application/yaml' --data-binary @"$work/rbac1.yaml" \
	https://192.0.2.1:6443/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings
as_vipproxy() { in_ns curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/vipproxy.crt" --key "$pki/vipproxy.key" "$@"; }
[ "$(as_vipproxy "$slice_url")" = 200 ] || { echo "FAIL: user vipproxy cannot list the EndpointSlices" >&2; exit 1; }
[ "$(as_vipproxy https://192.0.2.1:6443/api/v1/namespaces/default/secrets)" = 403 ] || { echo "FAIL: user vipproxy can list secrets" >&2; exit 1; }
step "RBAC from examples/rbac-discovery.yaml: vipproxy may list EndpointSlices, not secrets"

cat >"$work/vipproxy.toml" <<TOML
[vip]
addresses = ["192.0.2.10"]
port = 6443

[[backend]]
name = "seed"
address = "192.0.2.1:6443"

[health]
type = "https"
interval = "500ms"
timeout = "500ms"
ca_file = "$pki/ca.crt"
server_name = "kubernetes"

[admin]
listen = "127.0.0.1:6449"

[network]
uplinks = ["eth1"]

[discovery]
enable = true
ca_file = "$pki/ca.crt"
cert_file = "$pki/vipproxy.crt"
key_file = "$pki/vipproxy.key"
grace = "3s"
state_dir = "$work"
TOML
ip netns exec "$ns" "$vipproxy" serve --config "$work/vipproxy.toml" >"$work/vipproxy.log" 2>&1 &
pids+=($!)
vstatus() { in_ns curl -sf http://127.0.0.1:6449/status; }
backends_are() { [ "$(vstatus | jq -r '[.backends[] | "\(.address)=\(.source)/\(.state)"] | sort | join(" ")')" = "$1" ]; }
t0=$(date +%s)
waitfor 60 "vipproxy to discover and check all three" backends_are \
	"192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up 192.0.2.3:6443=discovered/up"
step "vipproxy seeded with 192.0.2.1 uses all three after $(($(date +%s) - t0))s: $(vstatus | jq -c '[.backends[] | {address, source, state}]')"

# A request loop through the VIP for the rest of the test.
loop() {
	local ok=0 failed=0
	while [ ! -e "$work/stop" ]; do
		if kc -o /dev/null --max-time 10 https://192.0.2.10:6443/version; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
		sleep 0.1
	done
	echo "$ok $failed" >"$work/loop.result"
}
loop &
loop_pid=$!
pids+=($loop_pid)
sleep 3
conns() { in_ns curl -sf http://127.0.0.1:6449/metrics | awk -v b="$1" -F'[{} ]' '$1=="vipproxy_connections_total" && $2=="backend=\""b"\"" {print $NF}'; }
c1=$(conns seed); c2=$(conns 192.0.2.2:6443); c3=$(conns 192.0.2.3:6443)
step "connections so far: seed=$c1 192.0.2.2=$c2 192.0.2.3=$c3"
for c in "$c1" "$c2" "$c3"; do [ "${c:-0}" -gt 0 ] || { echo "FAIL: a backend got no connection" >&2; exit 1; }; done

kill -9 "${api_pid[3]}"
tk=$(date +%s)
step "apiserver 3 SIGKILLed (its lease is left to expire)"
waitfor 120 "the EndpointSlice to drop 192.0.2.3" slice_is "192.0.2.1 192.0.2.2"
step "EndpointSlice without 192.0.2.3 after $(($(date +%s) - tk))s"
waitfor 60 "vipproxy to drop 192.0.2.3" backends_are "192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up"
step "vipproxy dropped 192.0.2.3 after $(($(date +%s) - tk))s (grace 3s)"
grep -q 'discovered backend draining.*192.0.2.3:6443' "$work/vipproxy.log" || { echo "FAIL: no drain log line" >&2; exit 1; }
touch "$work/stop"
wait "$loop_pid"
read -r ok failed <"$work/loop.result"
step "request loop through the VIP: $ok ok, $failed failed"
[ "$failed" = 0 ] || { echo "FAIL: $failed requests failed" >&2; exit 1; }
jq -c . "$work/discovered.json"
echo "PASS: make test-k8s ($(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - started))s)"
