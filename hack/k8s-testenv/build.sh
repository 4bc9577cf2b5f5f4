#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
# etcd from the Go module proxy into
# .cache/k8s/v$K8S_VERSION/ (or $K8S_BIN_DIR), using the pinned helper module
# next to this script (go.mod/go.sum: k8s.io/kubernetes v1.37.2 with every
# k8s.io staging module replaced by its v0.37.2 release).
#
# Binaries already present are kept: a cold build takes ~14 min on 2 cores
# (peak ~2.9 GB; kube-controller-manager and kube-scheduler add ~2.5 min to
# the apiserver's, whose build cache they share), a warm one (Go build cache
# kept) ~25 s.
#
# The build flags are fixed on purpose: -trimpath and the exact -ldflags are
# part of the Go build cache key, so any change costs a full cold rebuild.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
K8S_VERSION=1.37.2
out=${K8S_BIN_DIR:-$root/.cache/k8s/v$K8S_VERSION}
mkdir -p "$out"

binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)
all_present() {
  local b
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if all_present; then
  echo "k8s test binaries present in $out"
  exit 0
fi

# Two concurrent runs (two terminals, make -j) would build the same thing
# twice and race on the output files: serialize them.
if command -v flock >/dev/null; then
  exec 9>"$out/.build.lock"
  flock 9
  if all_present; then echo "k8s test binaries present in $out"; exit 0; fi
fi

# Stamp the release into the binaries, so that /version answers v1.37.2.
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ldf="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldf="$ldf -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

cd "$here"
# The caller's GOFLAGS must not change the build cache key.
export GOFLAGS=-mod=mod

# build NAME PACKAGE LDFLAGS: builds into NAME.tmp and renames, so that an
# interrupted build never leaves a truncated binary that looks present.
build() {
  local name=$1 pkg=$2 flags=$3 t
  if [ -x "$out/$name" ]; then
    echo "$name: present"
    return
  fi
  t=$(date +%s)
  echo "$name: building $pkg"
  trap 'rm -f "$out/$name.tmp"' EXIT
  go build -trimpath -ldflags "$flags" -o "$out/$name.tmp" "$pkg"
  mv "$out/$name.tmp" "$out/$name"
  trap - EXIT
  echo "$name: built in $(($(date +%s) - t))s"
}

t0=$(date +%s)
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldf"
# The disruption controller (PodDisruptionBudget status, which evictions are
# checked against), the workload controllers and the garbage collector, and
# the scheduler: the tests that move workloads run them.
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldf"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldf"
build kubectl k8s.io/kubernetes/cmd/kubectl "$ldf"
# etcd's version is the one k8s.io/kubernetes pins (3.7.0 for 1.37).
build etcd go.etcd.io/etcd/server/v3 "-s -w"

all_present || { echo "build incomplete in $out" >&2; exit 1; }
echo "built k8s test binaries in $out in $(($(date +%s) - t0))s"
"$out/kube-apiserver" --version
