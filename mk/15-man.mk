# Man pages: vipproxy(8) from the command table --help prints, and
# vipproxy.toml(5) from docs/configuration.md (internal/mangen). The
# release's tarballs and .deb install them from $(BIN)/man. The tests
# that hold them to --help and docs/operations.md, and render them with
# `man --warnings`, run in test-go (service/cli), beside those that load
# `vipproxy completion bash` and `zsh` into their shells.
APT_PACKAGES += man-db groff-base zsh

.PHONY: man completion
man:
	$(GO) run ./internal/mangen --out $(BIN)/man --version '$(VERSION)'

# The shell completions `vipproxy completion bash|zsh` print, as files:
# $(BIN)/completion/vipproxy for bash-completion
# (/usr/share/bash-completion/completions/) and _vipproxy for zsh
# (/usr/share/zsh/vendor-completions/).
completion:
	$(GO) run ./internal/mangen --completion $(BIN)/completion
