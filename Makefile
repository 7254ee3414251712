# vipproxy: the Makefile is the index of everything one can run.
# Each area adds its targets in mk/*.mk; `make test` runs every TEST_TARGETS
# entry, and `make deps` installs every APT_PACKAGES entry (CI starts bare).

SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# No HTTP/2 in net/http: the admin endpoint is plain HTTP/1.1 and the health
# checks speak HTTP/1.1, so it is dead code (0.35 MB of the binary).
GO_TAGS := nethttpomithttp2
BIN := bin
export CGO_ENABLED ?= 0

APT_PACKAGES :=
TEST_TARGETS :=

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
	@set -e; for t in $(TEST_TARGETS); do echo "=== make $$t"; $(MAKE) --no-print-directory $$t; done

clean:
	rm -rf $(BIN)
