# Performance: `make bench` measures vipproxy against a direct connection,
# HAProxy and nginx on loopback and prints one table (see docs/performance.md).
# Not part of `make test`: it takes minutes and its numbers are not pass/fail.
BENCH_APT := haproxy nginx libnginx-mod-stream util-linux procps strace
BENCH_SIZE_DIR := $(BIN)/bench-size
# e.g. make bench BENCH_FLAGS='--reps 5 --pin split'
BENCH_FLAGS ?=

.PHONY: bench bench-deps bench-size bench-go bench-storm
bench: bench-deps build bench-size bench-go
	$(BIN)/vipproxy-bench --vipproxy $(BIN)/vipproxy --size-dir $(BENCH_SIZE_DIR) \
		--out $(BIN)/bench-results.md $(BENCH_FLAGS)

# The reconnect storms alone: TLS watches through each proxy
# (sized to the load core, see --storm-clients in vipproxy-bench --help;
# e.g. STORM_FLAGS='--storm-clients 5000' to fix it), one backend SIGKILLed,
# the proxy restarted (also socket-activated), all connecting at once
# (also with no proxy at all: direct, the host's own time; and through
# floor, a bare event loop: the least a proxy costs there), and the
# upgrade: vipproxy restarted through the file descriptor store (the bench
# stands in for systemd) beside HAProxy's master-worker reload and its
# restart, new connections timed meanwhile (STORM_FLAGS='--storms upgrade
# --upgrade-from /path/to/older/vipproxy': a binary upgrade). The proxy on
# cpu 1, clients and backends on cpu 0.
STORM_FLAGS ?=
bench-storm: bench-deps build
	$(BIN)/vipproxy-bench --vipproxy $(BIN)/vipproxy --figures storm --contenders direct,vipproxy,haproxy,nginx,floor \
		--pin split --out $(BIN)/bench-storm.md $(STORM_FLAGS)

bench-deps:
	@missing=$$(for p in $(BENCH_APT); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The stripped static daemon for each architecture the flake ships, built
# like `make build` (same tags).
bench-size:
	@mkdir -p $(BENCH_SIZE_DIR)
	@for arch in amd64 arm64 riscv64; do \
		GOOS=linux GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GO_TAGS)' -ldflags '-s -w' \
			-o $(BENCH_SIZE_DIR)/vipproxy-linux-$$arch ./cmd/vipproxy || exit 1; \
	done; ls -l $(BENCH_SIZE_DIR)

# Go benchmarks of the hot paths (backend pick, connection setup, copy loop).
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./service/...
