# lib.sh: the cluster every k8s-tests scenario shares, and the helpers they
# use. Sourced by run.sh; see k8s-tests/README.md for how to add a scenario.
#
# In a private network namespace (traffic never leaves it), with TEST-NET
# addresses on its lo (an apiserver keeps loopback addresses out of its own
# EndpointSlice): Debian's etcd on 127.0.0.1, apiservers on 192.0.2.1-3
# (default lease endpoint reconciler), the VIP on 192.0.2.10, vipproxy's
# admin API on 127.0.0.1:6449.

vip=192.0.2.10
admin=127.0.0.1:6449
# The apiservers' own slice, by name as vipproxy asks for it (the RBAC of
# examples/rbac-discovery.yaml allows that one slice): foreign slices with
# the same label are not in it.
slice_url="https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes&fieldSelector=metadata.name%3Dkubernetes"
pids=()
# As k3s and RKE2 start kube-apiserver: anonymous requests get 401, /readyz
# included. A SIGTERMed apiserver keeps serving for the delay while its
# /readyz reports the shutdown (a real failing /readyz over working TLS).
APISERVER_FLAGS=(--anonymous-auth=false --shutdown-delay-duration=15s)
api_pid=()
api_stopping=()
vipproxy_pid=
started=$(date +%s)

in_ns() { ip netns exec "$ns" "$@"; }
step() { echo "[$(($(date +%s) - started))s] $*"; }
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
# waitfor SECONDS WHAT CMD...: poll every 0.5 s, bounded.
waitfor() {
	local limit=$1 what=$2
	shift 2
	for _ in $(seq $((limit * 2))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	fail "timed out after ${limit}s waiting for $what"
}

cleanup() {
	local rc=$?
	touch "$work/stop"
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	for d in "${credential_made[@]}"; do rmdir "$d" 2>/dev/null || true; done
	if [ $rc != 0 ]; then
		for f in "$work"/*.log "$work"/*/*.log; do
			[ -e "$f" ] || continue
			echo "=== tail $f"
			tail -n 25 "$f"
		done
	fi
	rm -rf "$work"
}

netns_setup() {
	step "network namespace $ns, TEST-NET addresses on lo"
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	for i in 1 2 3 10; do ip -n "$ns" addr add "192.0.2.$i/32" dev lo; done
	# An uplink for the config (an IPv4 VIP needs one); nothing uses it here.
	ip -n "$ns" link add eth1 type veth peer name eth1peer
	ip -n "$ns" link set eth1 up
}

# pki_setup: a CA, the apiservers' serving certificate, an admin client
# (system:masters) and a vipproxy client (no group: only what RBAC grants).
pki_setup() {
	step "PKI"
	pki=$work/pki
	mkdir -p "$pki"
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -subj /CN=vipproxy-k8s-test-ca -days 2
	pki_leaf apiserver /CN=kube-apiserver "subjectAltName=IP:192.0.2.1,IP:192.0.2.2,IP:192.0.2.3,IP:$vip,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth"
	pki_leaf admin "/O=system:masters/CN=admin" "extendedKeyUsage=clientAuth"
	pki_leaf vipproxy "/CN=vipproxy" "extendedKeyUsage=clientAuth"
	ossl genrsa -out "$pki/sa.key" 2048
	ossl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
	# A client certificate from a CA the apiservers do not trust.
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/foreign-ca.key" -out "$pki/foreign-ca.crt" -subj /CN=foreign-ca -days 2
	pki_leaf foreign /CN=vipproxy "extendedKeyUsage=clientAuth" foreign-ca
	kubeconfig_admin >"$work/admin.kubeconfig"
}
# kubeconfig_admin: kubectl as the admin, through the VIP.
kubeconfig_admin() { kubeconfig vip "https://$vip:6443" admin "$pki/admin.crt" "$pki/admin.key"; }
# kubeconfig NAME SERVER USER CERT KEY [SERVER_NAME]: a kubeconfig with one
# cluster NAME at SERVER, verified by the test CA (as SERVER_NAME if given),
# and one user with a client certificate.
kubeconfig() {
	local sni=
	[ -z "${6:-}" ] || sni=$'\n    tls-server-name: '"$6"
	cat <<YAML
apiVersion: v1
kind: Config
clusters:
- name: $1
  cluster:
    server: $2$sni
    certificate-authority: $pki/ca.crt
users:
- name: $3
  user:
    client-certificate: $4
    client-key: $5
contexts:
- name: $1
  context: {cluster: $1, user: $3}
current-context: $1
YAML
}
ossl() { openssl "$@" >/dev/null 2>&1; }
# pki_leaf NAME SUBJECT EXTENSIONS [CA]: a leaf signed by the test CA (or CA).
pki_leaf() {
	local ca=${4:-ca}
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2"
	printf '%b\n' "$3" >"$pki/$1.ext"
	ossl x509 -req -in "$pki/$1.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial -out "$pki/$1.crt" -days 2 -extfile "$pki/$1.ext"
}

etcd_start() {
	step "etcd $(etcd --version | head -1)"
	in_ns etcd --name default --data-dir "$work/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster default=http://127.0.0.1:2380 >"$work/etcd.log" 2>&1 &
	pids+=($!)
	waitfor 60 "etcd" in_ns curl -sf http://127.0.0.1:2379/health
}

# apiserver_args I: the flags apiserver I starts with. APISERVER_FLAGS (an
# array) adds or overrides flags, e.g. as a distribution starts it;
# APISERVER_NODE_FLAGS[I] (words) those of apiserver I alone;
# APISERVER_ETCD[I] its etcd endpoint in place of etcd's own (a list flag:
# a second --etcd-servers would add to it).
declare -A APISERVER_NODE_FLAGS APISERVER_ETCD
apiserver_args() {
	echo --etcd-servers="${APISERVER_ETCD[$1]:-http://127.0.0.1:2379}" \
		--advertise-address="192.0.2.$1" --bind-address="192.0.2.$1" --secure-port=6443 \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
		--authorization-mode=RBAC --endpoint-reconciler-type=lease --enable-priority-and-fairness=false \
		--cert-dir="$work/cert$1" "${APISERVER_FLAGS[@]}" ${APISERVER_NODE_FLAGS[$1]:-}
}
# apiserver_start I: start apiserver I (not waiting for it).
apiserver_start() {
	# ip netns exec itself (not in_ns, a function: & would fork a subshell)
	# so that $! is the apiserver, which signals reach.
	# shellcheck disable=SC2046 # the flags are words without spaces
	ip netns exec "$ns" "$apiserver" $(apiserver_args "$1") >>"$work/apiserver$1.log" 2>&1 &
	pids+=($!)
	api_pid[$1]=$!
}
# apiserver_ready I: /readyz answers 200 to the admin client.
apiserver_ready() { kc -o /dev/null "https://192.0.2.$1:6443/readyz"; }
apiserver_wait() { waitfor "${2:-300}" "apiserver $1 /readyz" apiserver_ready "$1"; }
# apiserver_kill I [SIGNAL]: signal apiserver I (default KILL) and reap it.
apiserver_kill() {
	kill -"${2:-KILL}" "${api_pid[$1]}"
	wait "${api_pid[$1]}" 2>/dev/null || true
}
# apiserver_kill_async I SIGNAL: signal apiserver I and go on (a SIGTERMed
# one serves on for --shutdown-delay-duration); cluster_whole reaps it.
apiserver_kill_async() {
	kill -"$2" "${api_pid[$1]}"
	api_stopping[$1]=1
}

apiserver_gone() { ! kill -0 "${api_pid[$1]}" 2>/dev/null; }

# need_kubectl: a scenario that runs kubectl fails clearly without one.
need_kubectl() { [ -n "$kubectl" ] && [ -x "$kubectl" ] || fail "no kubectl (make k8s-apiserver builds one beside kube-apiserver; or set KUBECTL)"; }

# kc: curl as the admin client (system:masters) from inside the namespace.
kc() { in_ns curl -sS --fail-with-body --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"; }
slice_addrs() { kc "$slice_url" | jq -r '[.items[].endpoints[] | select(.conditions.ready != false) | .addresses[]] | sort | join(" ")'; }
slice_is() { [ "$(slice_addrs)" = "$1" ]; }

# cluster_start: three apiservers on one etcd, the least RBAC for vipproxy's
# discovery applied from examples/rbac-discovery.yaml.
cluster_start() {
	etcd_start
	for i in 1 2 3; do apiserver_start "$i"; done
	# A build from the module proxy has no version stamped in: name the cache's.
	step "three kube-apiservers ($(basename "$(dirname "$apiserver")"), module k8s.io/kubernetes) starting ${APISERVER_FLAGS[*]}"
	for i in 1 2 3; do apiserver_wait "$i"; done
	step "apiservers ready"
	cluster_whole
	# The least RBAC, from the manifest in the repo: one POST per document.
	awk -v dir="$work" '/^---$/ {n++; next} {print > (dir "/rbac" n+0 ".yaml")}' "$repo/examples/rbac-discovery.yaml"
	kc -o /dev/null -H 'Content-Type: application/yaml' --data-binary @"$work/rbac0.yaml" \
		https://192.0.2.1:6443/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles
	kc -o /dev/null -H 'Content-Type: application/yaml' --data-binary @"$work/rbac1.yaml" \
		https://192.0.2.1:6443/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings
}
# cluster_restart FLAG...: restart all three apiservers with these
# APISERVER_FLAGS (none: the defaults) and wait until the cluster is whole.
cluster_restart() {
	local i
	for i in 1 2 3; do apiserver_kill "$i"; done
	APISERVER_FLAGS=("$@")
	step "apiservers restarting ${APISERVER_FLAGS[*]}"
	for i in 1 2 3; do apiserver_start "$i"; done
	cluster_whole
}
# cluster_whole: wait until all three apiservers are ready and listed in
# the kubernetes EndpointSlice. Every scenario leaves the cluster whole.
cluster_whole() {
	local i
	for i in 1 2 3; do
		if [ -n "${api_stopping[$i]:-}" ]; then
			waitfor 120 "apiserver $i to finish its shutdown" apiserver_gone "$i"
			wait "${api_pid[$i]}" 2>/dev/null || true
			api_stopping[$i]=
		fi
		if ! kill -0 "${api_pid[$i]}" 2>/dev/null; then apiserver_start "$i"; fi
	done
	for i in 1 2 3; do apiserver_wait "$i"; done
	waitfor 120 "the kubernetes EndpointSlice to list all three" slice_is "192.0.2.1 192.0.2.2 192.0.2.3"
}

# vipproxy_start CONFIG: run `vipproxy serve` in the namespace, its log in
# $swork/vipproxy.log (one at a time: it listens on the VIP and $admin).
# The daemon gets a RUNTIME_DIRECTORY as systemd gives it: its probe socket
# there ($swork/run/probe.sock) is all `vipproxy probe` asks. With
# $credentials (recipe_credentials) it gets them as LoadCredential= does:
# that directory mounted at /run/credentials/vipproxy.service in a mount
# namespace of its own, and CREDENTIALS_DIRECTORY naming it, so the config
# names them as the docs do.
vipproxy_start() {
	mkdir -p -m 0711 "$swork/run"
	local env=(RUNTIME_DIRECTORY="$swork/run") cmd=("$vipproxy" serve --config "$1")
	if [ -n "$credentials" ]; then
		credential_mountpoint
		env+=(CREDENTIALS_DIRECTORY="$credential_dir")
		# shellcheck disable=SC2016 # expanded by that sh
		cmd=(unshare --mount --propagation private sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$credentials" "$credential_dir" "${cmd[@]}")
	fi
	env "${env[@]}" ip netns exec "$ns" "${cmd[@]}" >>"$swork/vipproxy.log" 2>&1 &
	vipproxy_pid=$!
	pids+=($vipproxy_pid)
}
credentials=
credential_dir=/run/credentials/vipproxy.service
credential_made=()
# credential_mountpoint: $credential_dir, which systemd makes for a unit
# with credentials, made here where the host has none (PID 1 not systemd)
# and removed by cleanup; the files are only ever mounted on it in the
# daemon's own mount namespace.
credential_mountpoint() {
	local d
	for d in "$(dirname "$credential_dir")" "$credential_dir"; do
		[ -d "$d" ] && continue
		mkdir -m 0755 "$d"
		credential_made=("$d" "${credential_made[@]}")
	done
}
vipproxy_stop() {
	[ -n "$vipproxy_pid" ] || return 0
	kill "$vipproxy_pid" 2>/dev/null || true
	wait "$vipproxy_pid" 2>/dev/null || true
	vipproxy_pid=
}
# discovery_config CHECK [LINE...]: a vipproxy config seeded with apiserver
# 1 only, a health check of type CHECK, discovery as user vipproxy (state
# in $swork), and each LINE added to the [discovery] table.
discovery_config() {
	cat <<TOML
[vip]
addresses = ["$vip"]
port = 6443

[[backend]]
name = "seed"
address = "192.0.2.1:6443"

[health]
type = "$1"
interval = "500ms"
timeout = "500ms"
ca_file = "$pki/ca.crt"
server_name = "kubernetes"

[admin]
listen = "$admin"

[network]
uplinks = ["eth1"]

[discovery]
enable = true
ca_file = "$pki/ca.crt"
cert_file = "$pki/vipproxy.crt"
key_file = "$pki/vipproxy.key"
state_dir = "$swork"
TOML
	shift
	[ $# = 0 ] || printf '%s\n' "$@"
}
# as_vipproxy CURL_ARG...: the HTTP status user vipproxy gets (what the RBAC
# of examples/rbac-discovery.yaml lets it read).
as_vipproxy() { in_ns curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/vipproxy.crt" --key "$pki/vipproxy.key" "$@"; }
# vstatus: vipproxy's /status document.
vstatus() { in_ns curl -sf "http://$admin/status"; }
# backends_are "ADDR=SOURCE/STATE ...": the backends in /status, sorted.
backends_are() { [ "$(vstatus | jq -r '[.backends[] | "\(.address)=\(.source)/\(.state)"] | sort | join(" ")')" = "$1" ]; }
# conns BACKEND: vipproxy_connections_total for that backend label, summed
# over its ports (each series also carries port="NAME").
conns() {
	in_ns curl -sf "http://$admin/metrics" | awk -v want="backend=\"$1\"" -F'[{} ]' '
		$1 == "vipproxy_connections_total" {
			n = split($2, labels, ",")
			for (i = 1; i <= n; i++) if (labels[i] == want) { sum += $NF; seen = 1 }
		}
		END { if (seen) print sum }'
}

# request_loop CMD...: run CMD (one request) every 0.1 s in the background
# until loop_stop, which sets loop_ok, loop_failed and loop_cut. Each
# request's start, end (µs: exact in awk's doubles) and exit status go to
# $swork/loop.log.
request_loop() {
	rm -f "$swork/loop.stop" "$swork/loop.log" "$swork/loop.kill"
	(
		# (a subshell: start and rc stay in it)
		while [ ! -e "$swork/loop.stop" ] && [ ! -e "$work/stop" ]; do
			start=$(date +%s%6N)
			if "$@"; then rc=0; else rc=$?; fi
			echo "$start $(date +%s%6N) $rc" >>"$swork/loop.log"
			sleep 0.1
		done
	) &
	loop_pid=$!
	pids+=($loop_pid)
}
# loop_kill I: SIGKILL apiserver I under the request loop, noting when.
# A request that apiserver I was answering at that instant is cut with it:
# its answer had begun, so no proxy can replay it (the loop is sequential,
# so that is one request at most). Every other request must succeed.
loop_kill() {
	local from
	from=$(date +%s%6N)
	apiserver_kill "$1"
	echo "$from $(date +%s%6N)" >"$swork/loop.kill"
}
# loop_start: GET /version through the VIP as the admin, in a request_loop.
loop_start() { request_loop kc -o /dev/null --max-time 10 "https://$vip:6443/version"; }
# loop_stop: end the loop; loop_cut counts the failed requests in flight
# at loop_kill's kill, loop_failed the others.
loop_stop() {
	touch "$swork/loop.stop"
	wait "$loop_pid"
	local kill_from=0 kill_to=0
	[ -e "$swork/loop.kill" ] && read -r kill_from kill_to <"$swork/loop.kill"
	read -r loop_ok loop_failed loop_cut < <(awk -v from="$kill_from" -v to="$kill_to" '
		$3 == 0 { ok++; next }
		from > 0 && $1 < to && $2 > from { cut++; next }
		{ failed++ }
		END { print ok + 0, failed + 0, cut + 0 }' "$swork/loop.log")
}
