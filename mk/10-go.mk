# Go unit and integration tests (real sockets, real processes), vet,
# staticcheck, and the race detector on the concurrent packages.
TEST_TARGETS += test-go test-race test-fuzz lint
STATICCHECK_VERSION ?= v0.8.2
GOVULNCHECK_VERSION ?= v1.9.0
# The data path, health checks, pool, admin and daemon (reload, drain) run
# again under the race detector (it needs cgo).
RACE_PKGS ?= ./service/metrics ./service/logging ./service/proxy ./service/proxy/engine ./service/health ./service/balance ./service/admin ./service/daemon ./service/listen ./service/discovery

# How long `make test` fuzzes the config loader (the seed corpus in
# service/config/testdata/fuzz runs in test-go anyway).
FUZZTIME ?= 15s

.PHONY: test-go test-race test-fuzz lint vulncheck
test-go: build
	$(GO) test -count=1 ./...

test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)

test-fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./service/config

# govulncheck needs the vulnerability database, which CI cannot reach:
# it runs only when VULNCHECK=1 (make test VULNCHECK=1, or make vulncheck).
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt: not formatted: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@if [ "$(VULNCHECK)" = 1 ]; then $(MAKE) --no-print-directory vulncheck; \
	else echo "govulncheck: skipped (no vulnerability database here; run with VULNCHECK=1)"; fi

vulncheck:
	$(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) ./...

# Repeated code (docs/development.md): the pairs `duplicates` lists over the
# tree, less those that stand on Go import blocks (internal/dupcount), must
# not grow past DUPLICATES_MAX. Not in make test: CI has no `duplicates` tool.
DUPLICATES_MAX ?= 30
.PHONY: check-duplicates
check-duplicates:
	@command -v duplicates >/dev/null || { echo "check-duplicates: no duplicates tool on PATH"; exit 2; }
	@out=$$(duplicates --seconds 120 --most 200); \
	case "$$out" in *"incomplete:"*) echo "$$out"; echo "check-duplicates: the count is incomplete"; exit 1;; esac; \
	res=$$(echo "$$out" | $(GO) run ./internal/dupcount) || exit 1; echo "$$res"; \
	n=$$(echo "$$res" | awk '/^dupcount:/ { print $$2 }'); \
	if [ "$$n" -gt $(DUPLICATES_MAX) ]; then echo "check-duplicates: $$n pairs, at most $(DUPLICATES_MAX): see docs/development.md"; exit 1; fi; \
	echo "check-duplicates: $$n pairs (at most $(DUPLICATES_MAX))"
