# scenario readyz-anonymous: readiness verified without credentials. The
# apiservers start with examples/authentication-config.yaml
# (--authentication-config: anonymous requests allowed to /readyz, /livez
# and /healthz alone) and without --anonymous-auth, as kubeadm, k3s, RKE2
# and k0s start them with the docs' recipe
# (docs/distributions.md#readiness-without-credentials): an anonymous GET
# /readyz answers 200, any other anonymous request 401. Apiserver 3 reaches
# etcd through a relay of its own (its etcd, as a stacked control plane's
# local member is), which the scenario stops. For each of
# examples/{kubeadm,k3s,rke2,k0s}.toml as shipped (the default check, no
# credentials): the three apiservers up with readiness verified, doctor's
# API port PASS; apiserver 3's etcd stopped: apiserver 3 marked down (its
# /readyz fails), the other two up, kubectl through the VIP 5/5; its etcd
# back: 3/3 up and verified.
. "$repo/k8s-tests/recipes.sh"

readyz_anonymous_flags=(--authentication-config="$repo/examples/authentication-config.yaml"
	--shutdown-delay-duration=15s)

scenario_readyz_anonymous() {
	local saved=("${APISERVER_FLAGS[@]}") name path code
	relay_start
	APISERVER_ETCD[3]=http://127.0.0.1:2479
	cluster_restart "${readyz_anonymous_flags[@]}"
	for path in /readyz /livez /healthz /version /api /api/v1/namespaces/default/endpoints; do
		code=$(anon_status "$path")
		case $path in
		/readyz | /livez | /healthz) [ "$code" = 200 ] || fail "anonymous GET $path answered $code, want 200" ;;
		*) [ "$code" = 401 ] || fail "anonymous GET $path answered $code, want 401 (anonymous auth off outside the health endpoints)" ;;
		esac
	done
	step "examples/authentication-config.yaml: anonymous GET /readyz /livez /healthz 200; /version, /api, endpoints 401"
	for name in kubeadm k3s rke2 k0s; do
		readyz_anonymous_recipe "$name"
	done
	APISERVER_ETCD[3]=
	cluster_restart "${saved[@]}"
	relay_stop
}

# readyz_anonymous_recipe NAME: examples/NAME.toml (no credentials) sees
# readiness: 3/3 verified; apiserver 3 down while its etcd is stopped.
readyz_anonymous_recipe() {
	local name=$1 doc
	recipe_config "$name" >"$swork/$name.toml"
	! grep -q '^cert_file\|^token_file' "$swork/$name.toml" || fail "examples/$name.toml has check credentials"
	vipproxy_start "$swork/$name.toml"
	waitfor 60 "examples/$name.toml: 3/3 apiservers up and verified" api_verified 3
	# (RKE2's and k0s's other ports have no listener here: doctor fails
	# those; the API port's line is the one that matters.)
	doc=$(in_ns "$vipproxy" doctor --config "$swork/$name.toml" --control "$swork/run/control.sock" --only backends || true)
	grep -q '^PASS backends .*all 3 backends pass the https (GET /readyz, want 200) check' <<<"$doc" &&
		! grep -q unverified <<<"$doc" || fail "doctor does not pass the API port's backends verified: $doc"
	step "examples/$name.toml, no credentials: 3/3 apiservers up, readiness verified; doctor PASS"
	relay_stop
	waitfor 60 "examples/$name.toml: apiserver 3 marked down with its etcd stopped" api_state 192.0.2.3 down
	api_verified 2 || fail "apiservers 1 and 2 not both up and verified: $(vstatus | jq -c .backends)"
	step "apiserver 3's etcd stopped: its /readyz $(anon_status /readyz 3) without credentials, marked down; 1 and 2 up"
	recipe_kubectl_gets 5
	relay_start
	waitfor 120 "examples/$name.toml: 3/3 up and verified with apiserver 3's etcd back" api_verified 3
	step "apiserver 3's etcd back: 3/3 up and verified"
	vipproxy_stop
}

# relay_start: apiserver 3's way to etcd, 127.0.0.1:2479 to etcd's 2379 (a
# session of its own, so that relay_stop ends every connection with it).
relay_start() {
	ip netns exec "$ns" setsid socat TCP-LISTEN:2479,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:2379 >>"$swork/relay.log" 2>&1 &
	relay_pid=$!
	pids+=("$relay_pid")
	waitfor 10 "the etcd relay" in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/2479'
}
relay_stop() {
	kill -- -"$relay_pid" 2>/dev/null || true
	wait "$relay_pid" 2>/dev/null || true
}

# anon_status PATH [I]: the HTTP status of an anonymous GET PATH on
# apiserver I (default 1).
anon_status() { in_ns curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" "https://192.0.2.${2:-1}:6443$1"; }
# api_verified N: N backends on port 6443 up with readiness verified.
api_verified() { [ "$(vstatus | jq '[.backends[] | select((.address | endswith(":6443")) and .state == "up" and .verified)] | length')" = "$1" ]; }
# api_state HOST STATE: HOST's backend on port 6443 is in STATE.
api_state() { [ "$(vstatus | jq -r --arg a "$1:6443" '[.backends[] | select(.address == $a) | .state] | first')" = "$2" ]; }
