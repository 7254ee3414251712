# Reliability: the fault suite (service/daemon/faults_test.go) runs in
# `make test` with the daemon package (test-go, and lighter in test-race).
# `make soak` runs SOAK_DURATION of mixed load with a backend killed and a
# reload every 10 s, then checks that vipproxy's goroutines, descriptors and
# memory come back to where they started. Not part of `make test`.
# nftables: the blackholed-backend case drops SYNs in a private netns.
APT_PACKAGES += nftables util-linux
SOAK_DURATION ?= 3m
FAULT_TESTS := Fault|Flood|PanicMode|FIFOConfig|ReloadToManyNew|BadReloads|GarbageClients|Blackholed|HalfClose|AllBackendsDown|RestartKeepsListener|ReloadUnderLoad|ManyConnections|DescriptorExhaustion|BackendKilled

.PHONY: soak faults
soak:
	VIPPROXY_SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -v -timeout 60m -run '^TestSoak$$' ./service/daemon/

# The fault suite alone, verbose: the figures of docs/reliability.md.
faults:
	set -o pipefail; $(GO) test -count=1 -v -run '$(FAULT_TESTS)' ./service/daemon/ | grep -E '^(---|ok|FAIL|PASS)|_test.go:'
