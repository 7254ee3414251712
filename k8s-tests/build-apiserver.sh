#!/bin/bash
# build-apiserver.sh VERSION CACHE: build a real kube-apiserver, kubectl and
# kubeadm from the Go module proxy (no git clone, no container image) into
# CACHE/vVERSION/ (kubectl: the scenarios' client through the VIP; kubeadm:
# renders the static pod manifests of examples/kubeadm/).
# k8s.io/kubernetes cannot be required on its own: its go.mod replaces every
# k8s.io/<staging> module with ./staging/src/..., so the throw-away module
# here replaces each of them with the published v0.<minor>.<patch>.
# Run under `flock /tmp/vipproxy-vm.lock`: about 5 minutes on both cores.
set -euo pipefail
version=${1:?usage: build-apiserver.sh VERSION CACHE}
cache=${2:?usage: build-apiserver.sh VERSION CACHE}
out=$cache/v$version
mkdir -p "$cache"
# Two runs at once (two CI jobs) build once: the second waits, then finds it.
exec 9>"$cache/.build.lock"
flock 9
bins="kube-apiserver kubectl kubeadm"
missing=
for b in $bins; do [ -x "$out/$b" ] || missing="$missing $b"; done
if [ -z "$missing" ]; then
	echo "cached: $out/kube-apiserver $out/kubectl $out/kubeadm"
	exit 0
fi
staging=v0.${version#*.}
mkdir -p "$out/src"
cd "$out/src"
rm -f go.mod go.sum
go mod init vipproxy-k8s-build >/dev/null 2>&1
# The staging modules are the ones the upstream go.mod replaces with paths.
upstream=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
mods=$(sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$upstream")
[ -n "$mods" ] || { echo "no staging modules found in $upstream" >&2; exit 1; }
for m in $mods; do
	go mod edit -replace "$m=$m@$staging"
done
go mod edit -require "k8s.io/kubernetes@v$version"
printf 'package main\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\t_ "k8s.io/kubectl/pkg/cmd"\n\t_ "k8s.io/kubernetes/cmd/kubeadm/app"\n)\n\nfunc main() {}\n' >keep.go
GOFLAGS=-mod=mod go mod tidy
# The version stamped in as Kubernetes' own build does (hack/lib/version.sh):
# kubeadm refuses to upgrade with a version it cannot parse.
v=k8s.io/component-base/version
minor=${version#*.}
ldflags="-s -w -X $v.gitVersion=v$version -X $v.gitMajor=${version%%.*} -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean"
for b in $missing; do
	CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b"
	mv "$out/$b.tmp" "$out/$b"
	ls -l "$out/$b"
done
