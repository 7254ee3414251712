# Registered here, last, on purpose: vm-test-ci (mk/40-vm.mk) runs after
# every other test of make test, so that the VM images it boots, built in the
# background from make test's start (vm-images-ci), overlap all of them.
TEST_TARGETS += vm-test-ci
TEST_BACKGROUND += vm-images-ci
