#!/usr/bin/env bash
# Build the real control-plane binaries the tests and the local run need, from Go modules,
# into a cache directory outside the repository, keyed by component and version.
# Only what is missing is built. Usage: hack/build-controlplane.sh [component ...]
# Components: etcd kube (apiserver + controller-manager) kwok volcano (vc-scheduler + CRDs).
# Prints the cache directory on the last line of stdout.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.35.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
KWOK_VERSION=${KWOK_VERSION:-0.8.0}
VOLCANO_VERSION=${VOLCANO_VERSION:-1.14.1}
# Volcano builds its API types from a local staging copy that is not in its module zip; the
# separately published volcano.sh/apis module stands in. The module proxy does not serve
# volcano.sh/apis v1.15.x or v1.14.1, and Volcano v1.15.0 does not compile against apis v1.14.0;
# so Volcano v1.14.1 (Kubernetes 1.34 libraries, fine with a 1.35 apiserver) is built against
# apis v1.14.0.
VOLCANO_APIS_VERSION=${VOLCANO_APIS_VERSION:-1.14.0}
CACHE=${KTHENA_PY_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kthena-py/bin}
GOVER=$(go env GOVERSION)

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

log() { printf '[build-controlplane %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

workdir() {
  local w; w=$(mktemp -d "${TMPDIR:-/tmp}/kthena-build.XXXXXX")
  echo "$w"
}

build_etcd() {
  local out="$CACHE/etcd-v$ETCD_VERSION-$GOVER"
  [ -x "$out/etcd" ] && { log "etcd v$ETCD_VERSION cached"; return; }
  log "building etcd v$ETCD_VERSION (a few minutes)"
  local w; w=$(workdir); (
    cd "$w"; go mod init kthena-py.local/etcdbin >/dev/null 2>&1
    go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
    mkdir -p "$out.tmp"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
  ); rm -rf "$w"
  rm -rf "$out"; mv "$out.tmp" "$out"; log "etcd done"
}

build_kube() {
  local out="$CACHE/k8s-v$K8S_VERSION-$GOVER"
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && { log "kubernetes v$K8S_VERSION cached"; return; }
  log "building kube-apiserver and kube-controller-manager v$K8S_VERSION (cold: 15-40 minutes on 2 cores)"
  local stg="v0.${K8S_VERSION#1.}" minor; minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  local w; w=$(workdir); (
    cd "$w"; go mod init kthena-py.local/k8sbin >/dev/null 2>&1
    local info gomod commit
    info=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION")
    gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
    commit=$(python3 -c 'import json,sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash","unknown"))' <<<"$info")
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod"); do
      go mod edit -replace="$m=$m@$stg"
    done
    go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" >&2
    local date ldf="-s -w" p
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ldf+=" -X $p.gitCommit=$commit -X $p.gitTreeState=clean -X $p.buildDate=$date"
    done
    mkdir -p "$out.tmp"
    go build -p 2 -trimpath -ldflags "$ldf" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  ); rm -rf "$w"
  rm -rf "$out"; mv "$out.tmp" "$out"; log "kubernetes done"
}

build_kwok() {
  local out="$CACHE/kwok-v$KWOK_VERSION-$GOVER"
  [ -x "$out/kwok" ] && [ -d "$out/stages" ] && { log "kwok v$KWOK_VERSION cached"; return; }
  log "building kwok v$KWOK_VERSION"
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  local src; src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage"
  mkdir -p "$out.tmp/stages"
  cp "$src/node/fast/node-initialize.yaml" "$src/pod/fast/pod-ready.yaml" \
     "$src/pod/fast/pod-complete.yaml" "$src/pod/fast/pod-delete.yaml" "$out.tmp/stages/"
  chmod -R u+w "$out.tmp"
  rm -rf "$out"; mv "$out.tmp" "$out"; log "kwok done"
}

build_volcano() {
  local out="$CACHE/volcano-v$VOLCANO_VERSION-apis-v$VOLCANO_APIS_VERSION-$GOVER"
  [ -x "$out/vc-scheduler" ] && [ -d "$out/crd" ] && { log "volcano v$VOLCANO_VERSION cached"; return; }
  log "building vc-scheduler v$VOLCANO_VERSION (cold: 5-15 minutes)"
  local w; w=$(workdir); (
    cd "$w"; go mod init kthena-py.local/vcbin >/dev/null 2>&1
    local info gomod
    info=$(go mod download -json "volcano.sh/volcano@v$VOLCANO_VERSION")
    gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
    python3 - "$gomod" <<'PY' | while read -r r; do go mod edit -replace="$r"; done
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r'\s*(?:replace\s+)?(\S+)\s+=>\s+(\S+)\s+(v\S+)\s*$', line)
    if m:
        print(f"{m.group(1)}={m.group(2)}@{m.group(3)}")
PY
    go mod edit -replace="volcano.sh/apis=volcano.sh/apis@v$VOLCANO_APIS_VERSION"
    go get -tool "volcano.sh/volcano/cmd/scheduler@v$VOLCANO_VERSION" >&2
    mkdir -p "$out.tmp/crd"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/vc-scheduler" volcano.sh/volcano/cmd/scheduler
    local src; src="$(go env GOMODCACHE)/volcano.sh/volcano@v$VOLCANO_VERSION/config/crd/volcano/bases"
    cp "$src"/scheduling.volcano.sh_podgroups.yaml "$src"/scheduling.volcano.sh_queues.yaml \
       "$src"/topology.volcano.sh_hypernodes.yaml "$src"/nodeinfo.volcano.sh_numatopologies.yaml "$out.tmp/crd/"
    chmod -R u+w "$out.tmp"
  ); rm -rf "$w"
  rm -rf "$out"; mv "$out.tmp" "$out"; log "volcano done"
}

components=("$@")
[ ${#components[@]} -eq 0 ] && components=(etcd kwok volcano kube)
mkdir -p "$CACHE"
for c in "${components[@]}"; do
  case "$c" in
    etcd) build_etcd ;; kube) build_kube ;; kwok) build_kwok ;; volcano) build_volcano ;;
    *) echo "unknown component: $c" >&2; exit 2 ;;
  esac
done
echo "$CACHE"
