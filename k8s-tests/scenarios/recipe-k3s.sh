# scenario recipe-k3s: docs/distributions.md's k3s recipe. The apiservers
# start with k3s's flags (--anonymous-auth=false among them); vipproxy runs
# examples/k3s.toml as the docs show it: 3/3 backends up (readiness
# unverified: /readyz answers 401), 10/10 kubectl GETs through the VIP,
# `vipproxy probe` exit 0. Then with the docs' check credentials for k3s
# (the kubelet's client certificate and key, two files) at the
# /run/credentials/vipproxy.service/ paths the docs write, handed over as
# examples/credentials/k3s.conf names them (LoadCredential=, no path
# rewritten): readiness verified, and an apiserver whose
# /readyz fails (SIGTERMed, serving on for --shutdown-delay-duration) is
# marked down.
. "$repo/k8s-tests/recipes.sh"

# How k3s starts kube-apiserver (pkg/daemons/control/server.go), what
# matters here: anonymous requests refused.
k3s_apiserver_flags=(--anonymous-auth=false 
	--profiling=false --shutdown-delay-duration=15s)

scenario_recipe_k3s() {
	local saved=("${APISERVER_FLAGS[@]}") all
	cluster_restart "${k3s_apiserver_flags[@]}"
	all="192.0.2.1:6443=static/up 192.0.2.2:6443=static/up 192.0.2.3:6443=static/up"
	recipe_config k3s >"$swork/k3s.toml"
	recipe_up "$swork/k3s.toml" "$all"
	[ "$(vstatus | jq '[.backends[] | select(.verified == false)] | length')" = 3 ] || fail "readiness not reported unverified: $(vstatus | jq -c .backends)"
	step "examples/k3s.toml: 3/3 backends up, readiness unverified (401 without credentials)"
	recipe_kubectl_gets 10
	recipe_probe "$swork/k3s.toml"
	vipproxy_stop

	recipe_with_check_credentials k3s two-file >"$swork/k3s-verified.toml"
	recipe_credentials k3s
	recipe_up "$swork/k3s-verified.toml" "$all"
	waitfor 30 "3/3 verified" recipe_verified 3
	step "with the docs' two-file check credentials and examples/credentials/k3s.conf (k3s's kubelet client certificate and key): 3/3 verified"
	recipe_kubectl_gets 10
	apiserver_kill_async 2 TERM
	waitfor 30 "apiserver 2 marked down while its /readyz fails" recipe_state 192.0.2.2:6443 down
	step "apiserver 2 SIGTERMed: /readyz fails, marked down; kubectl goes on"
	recipe_kubectl_gets 10
	vipproxy_stop
	cluster_whole # apiserver 2 finishes its shutdown and starts again
	cluster_restart "${saved[@]}"
}
