# scenario recipe-k0s: docs/distributions.md's k0s recipe. The apiservers
# start with k0s's flags (--anonymous-auth=false among them), TLS stand-ins
# on each node's 8132 (konnectivity) and 9443 (k0s API); vipproxy runs
# examples/k0s.toml as the docs show it (konnectivity on VIP:8134 to each
# node's 8132): every port balanced and checked on its own, 10/10 kubectl
# GETs, probe exit 0; stopping one node's 8132 moves only konnectivity's new
# connections, 0 failed.
. "$repo/k8s-tests/recipes.sh"

# How k0s starts kube-apiserver (pkg/component/controller/apiserver.go),
# what matters here.
k0s_apiserver_flags=(--anonymous-auth=false 
	--profiling=false --tls-min-version=VersionTLS12 --shutdown-delay-duration=15s)

scenario_recipe_k0s() {
	local saved=("${APISERVER_FLAGS[@]}") h p all=
	cluster_restart "${k0s_apiserver_flags[@]}"
	recipe_standins 8132 9443
	for h in 1 2 3; do for p in 6443 8132 9443; do all="$all 192.0.2.$h:$p=static/up"; done; done
	recipe_config k0s >"$swork/k0s.toml"
	recipe_up "$swork/k0s.toml" "${all# }"
	step "examples/k0s.toml: api, konnectivity and join up on all three nodes"
	recipe_kubectl_gets 10
	recipe_port_serves 8134
	recipe_port_serves 9443
	recipe_probe "$swork/k0s.toml"
	recipe_port_moves 8132 1 8134
	recipe_port_serves 9443
	recipe_kubectl_gets 10
	vipproxy_stop
	cluster_restart "${saved[@]}"
}
