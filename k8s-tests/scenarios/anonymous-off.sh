# scenario anonymous-off: the apiservers run with --anonymous-auth=false,
# as k3s and RKE2 start them (lib.sh's default flags). A config as the k3s
# recipe writes it, with no credentials for the check: 3/3 backends up
# (readiness unverified, said by /status, the metric, one WARN per backend
# and doctor's FAIL, a WARN once the config says accept_unverified), 10/10
# kubectl GETs through the VIP, `vipproxy probe` exit 0. Then the check given a client certificate (user vipproxy, no
# group: any authenticated user may GET /readyz): readiness verified, and
# an apiserver whose /readyz fails while it still serves TLS (SIGTERM with
# --shutdown-delay-duration: /readyz reports the shutdown) is marked down.
# A certificate from another CA is refused with 401: doctor names it.
scenario_anonymous_off() {
	local api
	need_kubectl
	api=$(in_ns curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" https://192.0.2.1:6443/readyz)
	[ "$api" = 401 ] || fail "an anonymous GET /readyz answered $api, want 401 (--anonymous-auth=false)"
	step "anonymous GET /readyz: 401"

	anon_config "" >"$swork/anon.toml"
	vipproxy_start "$swork/anon.toml"
	waitfor 60 "3/3 backends up" backends_are \
		"192.0.2.1:6443=static/up 192.0.2.2:6443=static/up 192.0.2.3:6443=static/up"
	step "examples/k3s.toml (the k3s recipe), no credentials for the check: $(vstatus | jq -c '[.backends[] | {name, state, verified}]')"
	[ "$(vstatus | jq '[.backends[] | select(.verified == false and (.unverified | test("answered 401")))] | length')" = 3 ] ||
		fail "/status does not say readiness is unverified: $(vstatus | jq -c .backends)"
	[ "$(metric_sum vipproxy_health_check_unverified)" = 3 ] || fail "vipproxy_health_check_unverified does not sum to 3"
	waitfor 10 "one WARN per backend" grep_count 3 'backend readiness unverified' "$swork/vipproxy.log"
	step "3/3 backends up, readiness unverified (/status, metric, $(grep -c 'backend readiness unverified' "$swork/vipproxy.log") WARN lines)"

	kubectl_gets 10
	in_ns "$vipproxy" probe --config "$swork/anon.toml" --control "$swork/run/probe.sock" || fail "vipproxy probe failed"
	step "vipproxy probe: exit 0"
	doctor "$swork/anon.toml" >"$swork/doctor-anon.txt" && fail "doctor passed with readiness unverified: $(cat "$swork/doctor-anon.txt")"
	grep -q '^FAIL backends   port api (6443): 3 of 3 backends answer, readiness unverified' "$swork/doctor-anon.txt" ||
		fail "doctor does not fail the unverified check: $(cat "$swork/doctor-anon.txt")"
	step "doctor: exit 1, FAIL (readiness unverified, with the fix)"
	anon_config "accept_unverified = true" >"$swork/accepted.toml"
	doctor "$swork/accepted.toml" >"$swork/doctor-accepted.txt" || fail "doctor failed with unverified readiness accepted: $(cat "$swork/doctor-accepted.txt")"
	grep -q '^WARN backends   port api (6443): 3 of 3 backends answer, readiness unverified (accepted' "$swork/doctor-accepted.txt" ||
		fail "doctor does not warn: $(cat "$swork/doctor-accepted.txt")"
	step "doctor with health.accept_unverified = true: exit 0, WARN"
	vipproxy_stop

	anon_config "ca_file = \"$pki/ca.crt\"
cert_file = \"$pki/vipproxy.crt\"
key_file = \"$pki/vipproxy.key\"" >"$swork/verified.toml"
	vipproxy_start "$swork/verified.toml"
	waitfor 60 "3/3 verified" verified_count 3
	step "with user vipproxy's client certificate: 3/3 verified"
	kubectl_gets 10
	local t0
	apiserver_kill_async 3 TERM
	t0=$(date +%s.%N)
	waitfor 30 "apiserver 3 marked down while it shuts down" backend_state 192.0.2.3:6443 down
	step "apiserver 3 SIGTERMed: /readyz fails during --shutdown-delay-duration, marked down after $(elapsed "$t0") s; it still serves TLS: $(in_ns curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" https://192.0.2.3:6443/readyz)"
	kubectl_gets 10

	anon_config "ca_file = \"$pki/ca.crt\"
cert_file = \"$pki/foreign.crt\"
key_file = \"$pki/foreign.key\"" >"$swork/foreign.toml"
	doctor "$swork/foreign.toml" >"$swork/doctor-foreign.txt" && fail "doctor passed with a refused certificate"
	grep -q 'status 401 Unauthorized: the apiserver refused the check.s credentials' "$swork/doctor-foreign.txt" &&
		grep -q 'fix: point \[health\] cert_file/key_file or token_file at a current credential' "$swork/doctor-foreign.txt" ||
		fail "doctor does not name the refused certificate: $(cat "$swork/doctor-foreign.txt")"
	step "doctor with a certificate from another CA: exit 1, 401 named with the fix"
}

# anon_config EXTRA: examples/k3s.toml (the k3s recipe's config) for these
# apiservers and this namespace's uplink, with EXTRA lines in [health].
anon_config() {
	sed -e 's/"192\.0\.2\.1\([123]\):6443"/"192.0.2.\1:6443"/' -e 's/^uplinks = \["eth0"\]/uplinks = ["eth1"]/' \
		"$repo/examples/k3s.toml" | awk -v extra="$1" '{print} /^\[health\]$/ && extra != "" {print extra}'
}

grep_count() { [ "$(grep -c "$2" "$3")" = "$1" ]; }
metric_sum() { in_ns curl -sf "http://$admin/metrics" | awk -v m="$1" -F'[{} ]' '$1==m {s+=$NF} END {print s+0}'; }
verified_count() { [ "$(vstatus | jq '[.backends[] | select(.verified)] | length')" = "$1" ]; }
backend_state() { [ "$(vstatus | jq -r --arg a "$1" '.backends[] | select(.address == $a) | .state')" = "$2" ]; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
doctor() { in_ns "$vipproxy" doctor --config "$1" --control "$swork/run/control.sock" --only daemon,backends; }

# kubectl_gets N: N `kubectl get namespace default` through the VIP, each
# on a new connection, all of which must succeed.
kubectl_gets() {
	local ok=0 i
	for i in $(seq "$1"); do
		if in_ns "$kubectl" --kubeconfig "$work/admin.kubeconfig" --request-timeout 5s get namespace default -o name >/dev/null 2>>"$swork/kubectl.log"; then
			ok=$((ok + 1))
		fi
	done
	step "kubectl through the VIP: $ok/$1 GETs"
	[ "$ok" = "$1" ] || fail "$(($1 - ok)) kubectl GETs failed: $(tail -3 "$swork/kubectl.log")"
}
