# Nix: offline checks of the flake, the NixOS module and the NixOS VM tests
# (what can be checked without nixpkgs; see docs/nixos.md).
TEST_TARGETS += test-nix
APT_PACKAGES += nix-bin pyflakes3 python3

.PHONY: test-nix nix-vendor-hash
test-nix: build
	nix/tests/check.sh all $(BIN)/vipproxy

# Recompute nix/package.nix's vendorHash after changing go.mod, go.sum or
# the packages the code imports.
nix-vendor-hash:
	nix/tests/check.sh vendor-hash --write
