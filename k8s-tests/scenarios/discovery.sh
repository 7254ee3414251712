# scenario discovery: vipproxy seeded with 192.0.2.1 only must discover .2
# and .3 through the `kubernetes` EndpointSlice with the least RBAC
# (examples/rbac-discovery.yaml), route to all three, and drop .3 once it
# is SIGKILLed and its lease expires, with a request loop running and no
# failed request but the one the kill may cut in flight (loop_kill).
scenario_discovery() {
	[ "$(as_vipproxy "$slice_url")" = 200 ] || fail "user vipproxy cannot list the EndpointSlices"
	[ "$(as_vipproxy https://192.0.2.1:6443/api/v1/namespaces/default/secrets)" = 403 ] || fail "user vipproxy can list secrets"
	step "RBAC from examples/rbac-discovery.yaml: vipproxy may list EndpointSlices, not secrets"

	discovery_config https 'grace = "3s"' >"$swork/vipproxy.toml"
	vipproxy_start "$swork/vipproxy.toml"
	local t0 tk c1 c2 c3 c
	t0=$(date +%s)
	waitfor 60 "vipproxy to discover and check all three" backends_are \
		"192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up 192.0.2.3:6443=discovered/up"
	step "vipproxy seeded with 192.0.2.1 uses all three after $(($(date +%s) - t0))s: $(vstatus | jq -c '[.backends[] | {address, source, state}]')"

	loop_start
	sleep 3
	c1=$(conns seed); c2=$(conns 192.0.2.2:6443); c3=$(conns 192.0.2.3:6443)
	step "connections so far: seed=$c1 192.0.2.2=$c2 192.0.2.3=$c3"
	for c in "$c1" "$c2" "$c3"; do [ "${c:-0}" -gt 0 ] || fail "a backend got no connection"; done

	loop_kill 3
	tk=$(date +%s)
	step "apiserver 3 SIGKILLed (its lease is left to expire)"
	waitfor 120 "the EndpointSlice to drop 192.0.2.3" slice_is "192.0.2.1 192.0.2.2"
	step "EndpointSlice without 192.0.2.3 after $(($(date +%s) - tk))s"
	waitfor 60 "vipproxy to drop 192.0.2.3" backends_are "192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up"
	step "vipproxy dropped 192.0.2.3 after $(($(date +%s) - tk))s (grace 3s)"
	grep -q 'discovered backend draining.*192.0.2.3:6443' "$swork/vipproxy.log" || fail "no drain log line"
	loop_stop
	step "request loop through the VIP: $loop_ok ok, $loop_failed failed, $loop_cut cut in flight by the kill"
	[ "$loop_failed" = 0 ] || fail "$loop_failed requests failed"
	jq -c . "$swork/discovered.json"
}
