# vipproxy: the Makefile is the index of everything one can run.
# Each area adds its targets in mk/*.mk; `make test` runs every TEST_TARGETS
# entry, and `make deps` installs every APT_PACKAGES entry (CI starts bare).

SHELL := /bin/bash
GO ?= go
# The version and commit `vipproxy version` prints: a release's VERSION
# file (line 1 the version, line 2 the commit) where there is one, as in a
# source tarball without git metadata; else git's. Empty when neither
# says: the binary then says "version unknown (built without git metadata)".
VERSION ?= $(shell sed -n 1p VERSION 2>/dev/null | grep . || git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell sed -n 2p VERSION 2>/dev/null | grep . || git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# No HTTP/2 in net/http: the admin endpoint is plain HTTP/1.1 and the health
# checks speak HTTP/1.1, so it is dead code (0.35 MB of the binary).
GO_TAGS := nethttpomithttp2
BIN := bin
export CGO_ENABLED ?= 0

APT_PACKAGES :=
TEST_TARGETS :=
# Long preparations make test starts in the background as it starts (the VM
# images, mk/40-vm.mk; the kube-apiserver, mk/80-k8s.mk), niced, so they use
# what the tests in front leave of the CPUs: the test that needs one waits
# for it itself (a lock), and any still running when make test ends, passed
# or failed, is stopped (its process group). The filter that prefixes its
# lines runs in that group too, not as a child of make: a make stopped
# while its recipe's children were still ending waited for a filter that
# waited for make's own output to end; and the group's leader waits (its
# TERM trapped) for that make, which waits for its recipes, so that
# `make test` ends only after all of them did (mk/make_test.go).
TEST_BACKGROUND :=

.PHONY: all build test deps demo clean
all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -tags '$(GO_TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

include $(sort $(wildcard mk/*.mk))

# deps installs what `make test` needs on a fresh Debian machine.
deps:
	@missing=$$(for p in $(sort $(APT_PACKAGES)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	$(GO) mod download

test: deps
	@set -e; bg=; trap 'for p in $$bg; do kill -TERM -- -$$p 2>/dev/null || true; done; wait' EXIT; \
	for b in $(TEST_BACKGROUND); do \
		echo "=== make $$b (background)"; \
		setsid bash -c 'trap : TERM; nice -n 10 $(MAKE) --no-print-directory "$$0" 2>&1 | sed -u "s/^/[$$0] /"' $$b & bg="$$bg $$!"; \
	done; \
	for t in $(TEST_TARGETS); do \
		echo "=== make $$t"; s=$$SECONDS; $(MAKE) --no-print-directory $$t; \
		echo "=== make $$t: done in $$((SECONDS - s)) s (make test at $$SECONDS s)"; \
	done

clean:
	rm -rf $(BIN)
