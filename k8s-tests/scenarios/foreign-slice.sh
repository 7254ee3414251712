# scenario foreign-slice: EndpointSlices that someone else writes
# in default with the apiservers' label (kubernetes.io/service-name=
# kubernetes) are never read. One exists before vipproxy starts and one is
# added while it watches, each naming an address nothing serves
# (192.0.2.66, 192.0.2.67: inside the namespace, unrouted); the
# apiservers list them beside their own slice, and vipproxy, seeded with
# 192.0.2.1, uses the three apiservers and nothing else, never naming the
# foreign addresses. The RBAC of examples/rbac-discovery.yaml lets
# vipproxy read the slice named kubernetes and no other.
foreign_slice_create() {
	kc -o /dev/null -H 'Content-Type: application/json' \
		https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices --data-binary @- <<JSON
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
 "metadata":{"name":"$1","labels":{"kubernetes.io/service-name":"kubernetes"}},
 "addressType":"IPv4","ports":[{"name":"https","port":6443,"protocol":"TCP"}],
 "endpoints":[{"addresses":["$2"],"conditions":{"ready":true}}]}
JSON
}
foreign_slice_delete() {
	kc -o /dev/null -X DELETE "https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/$1"
}
watching() { vstatus | jq -e '.discovery.state == "watching"'; }
foreign_listed() { kc "https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes" | jq -r '[.items[].endpoints[].addresses[]] | sort | join(" ")'; }

scenario_foreign_slice() {
	local labelled
	foreign_slice_create kubernetes-foreign 192.0.2.66
	labelled=$(foreign_listed)
	[ "$labelled" = "192.0.2.1 192.0.2.2 192.0.2.3 192.0.2.66" ] || fail "the label selector lists $labelled"
	step "a foreign slice with the apiservers' label: the label selector lists $labelled"
	[ "$(as_vipproxy "https://192.0.2.1:6443/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes-foreign")" = 403 ] ||
		fail "user vipproxy may read the foreign slice"
	step "RBAC: user vipproxy may not read it"

	discovery_config tls >"$swork/vipproxy.toml"
	vipproxy_start "$swork/vipproxy.toml"
	waitfor 60 "vipproxy to discover and check the three apiservers" backends_are \
		"192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up 192.0.2.3:6443=discovered/up"
	waitfor 30 "the watch" watching
	foreign_slice_create kubernetes-foreign-2 192.0.2.67
	step "a second foreign slice (192.0.2.67) added while vipproxy watches"
	sleep 5 # the merge runs at most once a second: five chances to take it
	backends_are "192.0.2.1:6443=static/up 192.0.2.2:6443=discovered/up 192.0.2.3:6443=discovered/up" ||
		fail "backends: $(vstatus | jq -c '[.backends[] | {address, source, state}]')"
	! grep -q '192\.0\.2\.6[67]' "$swork/vipproxy.log" || fail "vipproxy's log names a foreign address: $(grep '192\.0\.2\.6[67]' "$swork/vipproxy.log" | head -3)"
	step "vipproxy uses the three apiservers only: $(vstatus | jq -c '[.backends[].address]')"
	foreign_slice_delete kubernetes-foreign
	foreign_slice_delete kubernetes-foreign-2
}
