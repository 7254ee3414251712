# Real Kubernetes: the k8s-tests/scenarios against three kube-apiservers
# (and a kubectl as the client; kubeadm for test-kubeadm) built from the Go
# module proxy (k8s.io/kubernetes with its staging modules replaced at the
# matching versions; no git clone, no image), with Debian's etcd, in a
# private network namespace (k8s-tests/run.sh). The build takes ~7 minutes
# on both cores of the 2-core machine and is cached by version in K8S_CACHE
# (outside the repo), so CI pays it once per machine. Run by hand under the
# VM lock, which the build and three apiservers deserve:
#   make test-k8s VM_LOCK=/tmp/vipproxy-vm.lock [K8S_SCENARIOS="discovery ..."]
# Scenarios: k8s-tests/scenarios/*.sh (k8s-tests/README.md: adding one).
TEST_TARGETS += test-k8s test-kubeadm
# The build (from nothing ~7 min on a quiet 2-core machine, 28 min at load
# 15-35) starts in the background as make test starts; test-k8s waits for it
# (build-apiserver.sh's lock) and finds it cached.
TEST_BACKGROUND += k8s-apiserver
APT_PACKAGES += etcd-server jq openssl curl iproute2 socat
K8S_VERSION ?= 1.34.4
K8S_CACHE ?= /var/cache/vipproxy-k8s

.PHONY: test-k8s test-kubeadm k8s-apiserver
# VM_LOCK (mk/40-vm.mk): on a shared machine the build and the three
# apiservers take their turn like the VMs.
k8s-apiserver:
	$(VM_LOCKED) k8s-tests/build-apiserver.sh $(K8S_VERSION) $(K8S_CACHE)

test-k8s: build k8s-apiserver
	$(VM_LOCKED) k8s-tests/run.sh $(BIN)/vipproxy $(K8S_CACHE)/v$(K8S_VERSION)/kube-apiserver $(K8S_SCENARIOS)

# The kubeadm recipe (examples/kubeadm/) rendered by the real kubeadm of the
# same build: init, join and upgrade manifests of three control-plane nodes,
# each bound to its own address (k8s-tests/kubeadm.sh). No cluster, no
# network namespace: a few seconds once built.
test-kubeadm: k8s-apiserver
	k8s-tests/kubeadm.sh $(K8S_CACHE)/v$(K8S_VERSION)/kubeadm
