# Host side: networkd/sysctl files, keepalived wiring, the systemd units and
# the network-namespace proofs (ARP flux, pod hairpin) on the host kernel.
# The Go tests themselves run in test-go (go test ./...); the netns ones
# skip cleanly without root or `ip netns`.
TEST_TARGETS += test-host-units
APT_PACKAGES += iproute2 arping keepalived systemd bird2

# Highest systemd-analyze security exposure accepted for vipproxy.service.
HOST_MAX_EXPOSURE ?= 1.5

.PHONY: test-host-units test-host-netns
test-host-units: build
	systemd/verify-units.sh $(BIN)/vipproxy $(HOST_MAX_EXPOSURE)

# Just the netns scenarios, verbose (also part of test-go).
test-host-netns: build
	VIPPROXY_BIN=$(CURDIR)/$(BIN)/vipproxy $(GO) test -count=1 -v -run 'Hairpin|ARP|CLI|IPv6' ./service/netcfg/
