# scenario recipe-rke2: docs/distributions.md's RKE2 recipe. The apiservers
# start with RKE2's flags (--anonymous-auth=false among them), a TLS
# stand-in on each node's 9345 plays RKE2's supervisor; vipproxy runs
# examples/rke2.toml as the docs show it (ports api 6443 and supervisor
# 9345): every backend up on both ports, 10/10 kubectl GETs, the supervisor
# port balanced, probe exit 0; one node's supervisor stopped moves only
# 9345's new connections (0 failed) and the node keeps the VIP (api is the
# only required port).
. "$repo/k8s-tests/recipes.sh"

# How RKE2 starts kube-apiserver (its static pod), what matters here.
rke2_apiserver_flags=(--anonymous-auth=false 
	--profiling=false --shutdown-delay-duration=15s)

scenario_recipe_rke2() {
	local saved=("${APISERVER_FLAGS[@]}") h all=
	cluster_restart "${rke2_apiserver_flags[@]}"
	recipe_standins 9345
	for h in 1 2 3; do all="$all 192.0.2.$h:6443=static/up 192.0.2.$h:9345=static/up"; done
	recipe_config rke2 >"$swork/rke2.toml"
	recipe_up "$swork/rke2.toml" "${all# }"
	step "examples/rke2.toml: api and supervisor up on all three nodes"
	recipe_kubectl_gets 10
	recipe_port_serves 9345
	recipe_probe "$swork/rke2.toml"
	recipe_port_moves 9345 2
	recipe_probe "$swork/rke2.toml"
	vipproxy_stop
	cluster_restart "${saved[@]}"
}
