# Releases: `make release` (VERSION=0.1.0 to name one; by default `git
# describe`) builds into DIST, per architecture of RELEASE_ARCHS:
#   linux-ARCH/vipproxy                     the static binary (CGO_ENABLED=0)
#   vipproxy-VERSION-linux-ARCH.tar.gz      binary, units, examples, monitoring,
#                                           man pages, LICENSE, README, VERSION
#   vipproxy_DEBVERSION_ARCH.deb            packaging/debian/
# and SHA256SUMS over all of them. Only the product ships: vipproxy, not the
# test tooling (vipproxy-apiserver, -bench, -demo). No network: the Go
# modules are those `make deps` downloaded.
RELEASE_ARCHS ?= amd64 arm64 riscv64
DIST ?= dist
# The man pages `make man` writes; the release takes those that exist.
MAN_PAGES := $(BIN)/man/vipproxy.8 $(BIN)/man/vipproxy.toml.5
APT_PACKAGES += lintian qemu-user-static
# make test: a release of every architecture into its own directory, checked
# as a user gets it (packaging/check-release.sh): lintian on every .deb, the
# binaries static and reporting the version and commit, the tarballs'
# contents, their man pages rendered without a warning.
TEST_TARGETS += test-release

.PHONY: release test-release
release:
	@set -e; if $(MAKE) -n man >/dev/null 2>&1; then $(MAKE) --no-print-directory man; fi; \
	rm -rf $(DIST); mkdir -p $(DIST); \
	man=$$(for m in $(MAN_PAGES); do [ ! -f $$m ] || echo $$m; done); \
	for a in $(RELEASE_ARCHS); do \
		GOOS=linux GOARCH=$$a CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GO_TAGS)' -ldflags '$(LDFLAGS)' \
			-o $(DIST)/linux-$$a/vipproxy ./cmd/vipproxy; \
		packaging/tarball.sh '$(VERSION)' $$a $(DIST)/linux-$$a/vipproxy $(DIST) $$man; \
		packaging/debian/build-deb.sh '$(VERSION)' $$a $(DIST)/linux-$$a/vipproxy $(DIST) $$man; \
	done; \
	cd $(DIST) && sha256sum *.tar.gz *.deb linux-*/vipproxy >SHA256SUMS && cat SHA256SUMS

test-release:
	$(MAKE) --no-print-directory release DIST=$(BIN)/release-test
	GO=$(GO) packaging/check-release.sh $(BIN)/release-test '$(VERSION)' '$(COMMIT)' $(RELEASE_ARCHS)
