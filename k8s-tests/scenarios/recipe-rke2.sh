# scenario recipe-rke2: docs/distributions.md's RKE2 recipe. The apiservers
# start with RKE2's flags (--anonymous-auth=false among them) and the
# recipe's --permit-port-sharing=true, apiserver 1 on *:6443 as RKE2 binds
# it; a TLS stand-in on each node's 9345 plays RKE2's supervisor. Without
# vip.reuse_port vipproxy cannot bind VIP:6443 beside it and says why; with
# examples/rke2.toml as the docs show it (reuse_port, ports api 6443 and
# supervisor 9345): every backend up on both ports, 10/10 kubectl GETs
# through the VIP, apiserver 1 still answering on its own address, the
# supervisor port balanced, probe exit 0; one node's supervisor stopped
# moves only 9345's new connections (0 failed) and the node keeps the VIP
# (api is the only required port).
. "$repo/k8s-tests/recipes.sh"

# How RKE2 starts kube-apiserver (its static pod), what matters here, with
# the recipe's permit-port-sharing. RKE2 binds it to 0.0.0.0 on every
# server (pkg/cli/defaults/defaults.go); here apiserver 1 alone does: three
# in this one namespace on every address would share each address among
# them. The other two bind their own, sharing the port too.
rke2_apiserver_flags=(--anonymous-auth=false
	--profiling=false --shutdown-delay-duration=15s --permit-port-sharing=true)

scenario_recipe_rke2() {
	local saved=("${APISERVER_FLAGS[@]}") h all=
	APISERVER_NODE_FLAGS[1]=--bind-address=0.0.0.0
	cluster_restart "${rke2_apiserver_flags[@]}"
	# (kube-apiserver binds 0.0.0.0 as [::], every address of both families.)
	in_ns ss -Hltn 'sport = :6443' | grep -q ' \*:6443 ' || fail "apiserver 1 does not listen on *:6443: $(in_ns ss -Hltn 'sport = :6443')"
	recipe_standins 9345
	for h in 1 2 3; do all="$all 192.0.2.$h:6443=static/up 192.0.2.$h:9345=static/up"; done
	recipe_config rke2 >"$swork/rke2.toml"
	grep -qx 'reuse_port = true' "$swork/rke2.toml" || fail "examples/rke2.toml does not set vip.reuse_port"
	# The negative control: RKE2's apiserver on *:6443 keeps a vipproxy
	# without reuse_port off the VIP, and the daemon names it.
	sed 's/^reuse_port = true$/reuse_port = false/' "$swork/rke2.toml" >"$swork/rke2-unshared.toml"
	if in_ns timeout 30 "$vipproxy" serve --config "$swork/rke2-unshared.toml" >"$swork/unshared.log" 2>&1; then
		fail "vipproxy without reuse_port served beside apiserver 1 on *:6443"
	fi
	grep -q 'port 6443 is held by \[::\]:6443 (kube-apiserver.*permit-port-sharing=true' "$swork/unshared.log" || fail "vipproxy without reuse_port did not name kube-apiserver: $(tail -3 "$swork/unshared.log")"
	step "without vip.reuse_port: vipproxy cannot bind VIP:6443 beside apiserver 1 on *:6443, and names it"
	recipe_up "$swork/rke2.toml" "${all# }"
	step "examples/rke2.toml (reuse_port): api and supervisor up on all three nodes, VIP:6443 beside apiserver 1 on *:6443"
	local before
	before=$(rke2_proxied)
	recipe_kubectl_gets 10
	[ $(($(rke2_proxied) - before)) -ge 10 ] || fail "kubectl's GETs to the VIP did not go through vipproxy ($before, then $(rke2_proxied) connections proxied)"
	apiserver_ready 1 || fail "apiserver 1 does not answer on its own address beside vipproxy"
	step "apiserver 1 answers on 192.0.2.1:6443 (its wildcard listener), the VIP through vipproxy"
	recipe_port_serves 9345
	recipe_probe "$swork/rke2.toml"
	recipe_port_moves 9345 2
	recipe_probe "$swork/rke2.toml"
	vipproxy_stop
	unset 'APISERVER_NODE_FLAGS[1]'
	cluster_restart "${saved[@]}"
}

# rke2_proxied: connections vipproxy proxied to the three servers so far.
rke2_proxied() {
	local h n sum=0
	for h in 1 2 3; do
		n=$(conns "server$h")
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}
