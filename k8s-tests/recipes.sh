# recipes.sh: what the recipe-* scenarios share. Each follows one
# distribution's recipe of docs/distributions.md: its vipproxy config is
# examples/NAME.toml (the docs show it byte for byte), on the test cluster's
# addresses, against apiservers started with the distribution's flags.

# recipe_config NAME: examples/NAME.toml on this cluster: the node IPs
# 192.0.2.11-13 are the apiservers' 192.0.2.1-3 here and the uplink eth0 is
# eth1; nothing else changes (the VIP 192.0.2.10 and the admin address are
# the same).
recipe_config() {
	sed -e 's/192\.0\.2\.1\([123]\)\([^0-9]\)/192.0.2.\1\2/g' -e 's/"eth0"/"eth1"/' "$repo/examples/$1.toml"
}

# recipe_kubelet_cert: a node's kubelet client certificate and key in one
# file (as kubelet-client-current.pem), group system:nodes.
recipe_kubelet_cert() {
	[ -e "$pki/kubelet.pem" ] && return 0
	pki_leaf kubelet "/O=system:nodes/CN=system:node:worker1" "extendedKeyUsage=clientAuth"
	cat "$pki/kubelet.crt" "$pki/kubelet.key" >"$pki/kubelet.pem"
}

# recipe_credentials DIST: the credentials examples/credentials/DIST.conf
# hands vipproxy.service (LoadCredential=NAME:SOURCE), each SOURCE this
# cluster's file of that kind, copied to $swork/credentials/NAME as systemd
# copies them; the next vipproxy_start finds them where the config names
# them (/run/credentials/vipproxy.service/NAME). The config is used as the
# docs write it.
recipe_credentials() {
	recipe_kubelet_cert
	local name src
	credentials=$swork/credentials
	rm -rf "$credentials"
	mkdir -m 0700 "$credentials"
	while IFS=: read -r name src; do
		case $src in
		*/ca.crt) cp "$pki/ca.crt" "$credentials/$name" ;;
		*/kubelet-client-current.pem) cp "$pki/kubelet.pem" "$credentials/$name" ;;
		*/server-ca.crt) cp "$pki/ca.crt" "$credentials/$name" ;;
		*/client-kubelet.crt) cp "$pki/kubelet.crt" "$credentials/$name" ;;
		*/client-kubelet.key) cp "$pki/kubelet.key" "$credentials/$name" ;;
		*) fail "examples/credentials/$1.conf: no file of this cluster stands for $src" ;;
		esac
		chmod 0400 "$credentials/$name"
	done < <(sed -n 's/^LoadCredential=//p' "$repo/examples/credentials/$1.conf")
	[ -n "$(ls "$credentials")" ] || fail "examples/credentials/$1.conf names no credential"
}

# recipe_with_check_credentials NAME [two-file]: recipe_config NAME with its
# [health] table replaced by the docs' check credentials block
# (docs/distributions.md, between <!-- credentials --> markers: kubeadm's
# one .pem), or with two-file, the block the docs give k3s (certificate and
# key in two files, after "On k3s").
recipe_with_check_credentials() {
	recipe_config "$1" | awk '/^\[health\]$/ {skip=1; next} skip && /^$/ {skip=0; next} !skip'
	echo
	if [ "${2:-}" = two-file ]; then
		awk '/^On k3s / {f=1; next} f && /^```toml/ {in_block=1; next} in_block && /^```/ {exit} in_block' "$repo/docs/distributions.md"
	else
		awk '/<!-- credentials -->/ {f=1; next} /<!-- end credentials -->/ {f=0} f && !/^```/' "$repo/docs/distributions.md"
	fi
}

# recipe_standins PORT...: a TLS stand-in (vipproxy-apiserver, the test CA's
# serving certificate) on each apiserver address and PORT, for the ports a
# distribution puts beside 6443 (k0s konnectivity and join, RKE2 supervisor).
recipe_standins() {
	local port i
	for port in "$@"; do
		for i in 1 2 3; do
			# ip netns exec itself, not in_ns: $! of a function run in
			# the background is its subshell, which a kill leaves the
			# stand-in behind (never marked down, and an orphan).
			ip netns exec "$ns" "$(dirname "$vipproxy")/vipproxy-apiserver" --listen "192.0.2.$i:$port" --name "node$i-$port" \
				--cert "$pki/apiserver.crt" --key "$pki/apiserver.key" --client-ca "$pki/ca.crt" --log-level error \
				>>"$swork/standin.log" 2>&1 &
			pids+=($!)
			standin_pid[$i$port]=$!
		done
	done
	for port in "$@"; do
		for i in 1 2 3; do waitfor 30 "stand-in 192.0.2.$i:$port" in_ns bash -c "exec 3<>/dev/tcp/192.0.2.$i/$port"; done
	done
}
declare -A standin_pid

# recipe_up NAME EXPECTED: start vipproxy on FILE and wait for the backends.
recipe_up() {
	vipproxy_start "$1"
	waitfor 60 "backends $2" backends_are "$2"
}

# recipe_probe CONFIG: keepalived's track script passes.
recipe_probe() {
	in_ns "$vipproxy" probe --config "$1" --control "$swork/run/probe.sock" >/dev/null || fail "vipproxy probe failed"
	step "vipproxy probe: exit 0"
}

# recipe_port_moves PORT I [VIPPORT]: stop node I's stand-in on PORT under
# requests through VIP:VIPPORT (default PORT): it is marked down on that
# port only (its 6443 stays up), and 20 new requests through the VIP on
# VIPPORT all succeed, none on node I.
recipe_port_moves() {
	local port=$1 i=$2 vport=${3:-$1} n ok=0 elsewhere=0
	kill -9 "${standin_pid[$i$port]}"
	waitfor 30 "192.0.2.$i:$port marked down" recipe_state "192.0.2.$i:$port" down
	recipe_state "192.0.2.$i:6443" up || fail "192.0.2.$i:6443 went down with port $port"
	for _ in $(seq 20); do
		if n=$(kc --max-time 5 "https://$vip:$vport/name"); then
			ok=$((ok + 1))
			[ "$n" != "node$i-$port" ] && elsewhere=$((elsewhere + 1))
		fi
	done
	step "node $i's $port stopped: marked down on $port only (its 6443 up); 20 new connections to VIP:$vport: $ok ok, $elsewhere elsewhere"
	[ "$ok" = 20 ] && [ "$elsewhere" = 20 ] || fail "VIP:$vport after node $i's stop: $ok/20 ok, $elsewhere on other nodes"
}

# recipe_port_serves VIPPORT: requests through VIP:VIPPORT reach the stand-ins.
recipe_port_serves() {
	local seen=() n
	for _ in $(seq 6); do
		n=$(kc --max-time 5 "https://$vip:$1/name") || fail "VIP:$1 did not answer"
		seen+=("$n")
	done
	step "VIP:$1 balanced over: $(printf '%s\n' "${seen[@]}" | sort -u | tr '\n' ' ')"
}

# recipe_kubectl_gets N: N `kubectl get namespace default` through the VIP
# as the admin, each a new connection; all must succeed.
recipe_kubectl_gets() {
	need_kubectl
	local ok=0
	for _ in $(seq "$1"); do
		in_ns "$kubectl" --kubeconfig "$work/admin.kubeconfig" --request-timeout 5s get namespace default -o name \
			>/dev/null 2>>"$swork/kubectl.log" && ok=$((ok + 1))
	done
	step "kubectl through the VIP: $ok/$1 GETs"
	[ "$ok" = "$1" ] || fail "$(($1 - ok)) kubectl GETs failed: $(tail -3 "$swork/kubectl.log")"
}
# recipe_verified N: N backends' readiness verified (/status).
recipe_verified() { [ "$(vstatus | jq '[.backends[] | select(.verified)] | length')" = "$1" ]; }
# recipe_state ADDR STATE: the backend at ADDR is in STATE (/status).
recipe_state() { [ "$(vstatus | jq -r --arg a "$1" '[.backends[] | select(.address == $a) | .state] | first')" = "$2" ]; }
