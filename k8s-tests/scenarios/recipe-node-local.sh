# scenario recipe-node-local: docs/distributions.md's worker-only node.
# vipproxy runs examples/node-local.toml as the docs show it (loopback VIP
# 127.0.0.1:7445, seeds 192.0.2.1-2, discovery with the kubelet's client
# certificate at the /run/credentials/vipproxy.service/ paths the example
# names, handed over as examples/credentials/kubeadm.conf's LoadCredential=
# does, no path rewritten): it discovers
# 192.0.2.3; kubectl with the kubeconfig the docs give the kubelet
# (server https://127.0.0.1:7445, tls-server-name kubernetes) gets 10/10;
# an apiserver SIGKILLed under a request loop through the loopback VIP is
# marked down, then dropped when its lease expires: no request fails but
# the one the kill may cut in flight (loop_kill).
. "$repo/k8s-tests/recipes.sh"

scenario_recipe_node_local() {
	recipe_config node-local >"$swork/node-local.toml"
	recipe_credentials kubeadm
	recipe_up "$swork/node-local.toml" "192.0.2.1:6443=static/up 192.0.2.2:6443=static/up 192.0.2.3:6443=discovered/up"
	step "examples/node-local.toml: seeds 192.0.2.1-2, 192.0.2.3 discovered, all up"
	in_ns "$vipproxy" network check --config "$swork/node-local.toml" >"$swork/network-check.txt" || fail "network check: $(cat "$swork/network-check.txt")"
	in_ns "$vipproxy" keepalived render --config "$swork/node-local.toml" >/dev/null 2>&1 && fail "vipproxy keepalived rendered an instance in node-local mode"
	step "network check: lo holds the VIP; keepalived refused"

	node_local_kubeconfig >"$swork/kubelet.kubeconfig"
	local ok=0 i
	for i in $(seq 10); do
		in_ns "$kubectl" --kubeconfig "$swork/kubelet.kubeconfig" --request-timeout 5s get --raw /version >/dev/null 2>>"$swork/kubectl.log" && ok=$((ok + 1))
	done
	step "kubectl as the kubelet through 127.0.0.1:7445: $ok/10"
	[ "$ok" = 10 ] || fail "$((10 - ok)) GETs through the node-local VIP failed: $(tail -3 "$swork/kubectl.log")"

	node_local_loop_start
	sleep 2
	loop_kill 3
	local tk
	tk=$(date +%s)
	waitfor 30 "192.0.2.3 marked down" recipe_state 192.0.2.3:6443 down
	step "apiserver 3 SIGKILLed: marked down after $(($(date +%s) - tk))s"
	waitfor 120 "vipproxy to drop 192.0.2.3 once its lease expires" backends_are "192.0.2.1:6443=static/up 192.0.2.2:6443=static/up"
	step "192.0.2.3 dropped $(($(date +%s) - tk))s after the kill"
	loop_stop
	step "request loop through 127.0.0.1:7445: $loop_ok ok, $loop_failed failed, $loop_cut cut in flight by the kill"
	[ "$loop_failed" = 0 ] || fail "$loop_failed requests through the node-local VIP failed"
	[ "$loop_ok" -gt 0 ] || fail "no request went through"
}

# node_local_kubeconfig: the kubelet's kubeconfig as the docs write it for a
# node-local node (its client certificate: the node's).
node_local_kubeconfig() {
	kubeconfig local https://127.0.0.1:7445 kubelet "$pki/kubelet.pem" "$pki/kubelet.pem" kubernetes
}

# node_local_loop_start: GET /version through 127.0.0.1:7445 every 0.1 s as
# the kubelet (name checked: kubernetes) until loop_stop.
node_local_loop_start() { request_loop node_local_get; }
node_local_get() {
	in_ns curl -sS --fail-with-body --max-time 10 --cacert "$pki/ca.crt" --cert "$pki/kubelet.pem" \
		--connect-to kubernetes:7445:127.0.0.1:7445 -o /dev/null https://kubernetes:7445/version 2>>"$swork/loop.err"
}
