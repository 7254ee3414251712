# Go unit and integration tests (real sockets, real processes).
TEST_TARGETS += test-go

.PHONY: test-go
test-go: build
	$(GO) vet ./...
	$(GO) test -count=1 ./...
