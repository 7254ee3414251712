# scenario recipe-kubeadm: docs/distributions.md's kubeadm recipe. The
# apiservers start with kubeadm's flags (anonymous /readyz allowed);
# vipproxy runs examples/kubeadm.toml as the docs show it: 3/3 backends up
# and verified with no credentials, 10/10 kubectl GETs, probe exit 0.
. "$repo/k8s-tests/recipes.sh"

# How kubeadm's static pod starts kube-apiserver, what matters here:
# --anonymous-auth left at its default (true) (lib.sh gives RBAC authorization; Node would need kubelets).
kubeadm_apiserver_flags=(
	--enable-bootstrap-token-auth=true --shutdown-delay-duration=15s)

scenario_recipe_kubeadm() {
	local saved=("${APISERVER_FLAGS[@]}")
	cluster_restart "${kubeadm_apiserver_flags[@]}"
	recipe_config kubeadm >"$swork/kubeadm.toml"
	recipe_up "$swork/kubeadm.toml" "192.0.2.1:6443=static/up 192.0.2.2:6443=static/up 192.0.2.3:6443=static/up"
	waitfor 30 "3/3 verified" recipe_verified 3
	step "examples/kubeadm.toml: 3/3 backends up and verified (anonymous /readyz: 200)"
	recipe_kubectl_gets 10
	recipe_probe "$swork/kubeadm.toml"
	vipproxy_stop
	cluster_restart "${saved[@]}"
}
