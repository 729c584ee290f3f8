#!/usr/bin/env bash
# Build the real control-plane binaries and tools the tests and the local run need, from Go modules,
# into a cache directory outside the repository, keyed by component, version and Go version.
# Only what is missing is built. Usage: hack/build-controlplane.sh [component ...]
# Components: etcd kube (apiserver + controller-manager) kwok volcano (vc-scheduler + CRDs) kubectl helm,
# and go (only make sure a new enough Go is there). Default: all but go.
# Prints the cache directory on the last line of stdout; progress goes to stderr.
# hack/build-controlplane.sh --print-path kubectl|helm: builds that tool if missing, prints its path.
#
# Any Go works: when the local one is older than the modules need (GO_REQUIRED), Go GO_TOOLCHAIN is
# fetched through the Go module proxy (the golang.org/toolchain module, checksum-verified) and used.
# The go commands' own output goes to a log file per component; on a failure its last lines are shown.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
KWOK_VERSION=${KWOK_VERSION:-0.8.0}
VOLCANO_VERSION=${VOLCANO_VERSION:-1.14.1}
# Volcano builds its API types from a local staging copy that is not in its module zip; the
# separately published volcano.sh/apis module stands in. The module proxy does not serve
# volcano.sh/apis v1.15.x or v1.14.1, and Volcano v1.15.0 does not compile against apis v1.14.0;
# so Volcano v1.14.1 (Kubernetes 1.34 libraries, fine with a 1.35 apiserver) is built against
# apis v1.14.0.
VOLCANO_APIS_VERSION=${VOLCANO_APIS_VERSION:-1.14.0}
HELM_VERSION=${HELM_VERSION:-4.3.2}
# The newest `go` directive among the modules above (etcd, kwok and helm say go 1.26.0), and the
# toolchain fetched when the local Go is older.
GO_REQUIRED=1.26.0
GO_TOOLCHAIN=${GO_TOOLCHAIN:-1.26.8}
CACHE=${KTHENA_PY_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kthena-py/bin}

export GOFLAGS=-mod=mod CGO_ENABLED=0

STARTED=$SECONDS
log() { printf '[build %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
minutes() { local s=$1; printf '%dm%02ds' $((s / 60)) $((s % 60)); }
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

# --- Go -----------------------------------------------------------------------------------------
setup_go() {
  command -v go >/dev/null 2>&1 || die "no 'go' on PATH: install any Go (a distribution package is fine)"
  local have; have=$(go version | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p')
  [ -n "$have" ] || die "cannot read the version of $(command -v go): $(go version)"
  if version_ge "$have" "$GO_REQUIRED"; then
    export GOTOOLCHAIN=local
  elif version_ge "$have" 1.21; then
    # Go >= 1.21 fetches the toolchain itself, through GOPROXY, verified against the checksum database.
    log "Go $have is older than the $GO_REQUIRED the modules need: using Go $GO_TOOLCHAIN (fetched once, ~70 MB)"
    export GOTOOLCHAIN=go$GO_TOOLCHAIN
  else
    # Older Go cannot switch toolchains; download the same module with it and put it first on PATH.
    local dir="$CACHE/go-$GO_TOOLCHAIN"
    if [ ! -x "$dir/bin/go" ]; then
      log "Go $have is older than the $GO_REQUIRED the modules need: fetching Go $GO_TOOLCHAIN (~70 MB)"
      local goos goarch w info src
      goos=$(go env GOOS) goarch=$(go env GOARCH) w=$(workdir)
      info=$( cd "$w" && go mod init kthena-py.local/toolchain >/dev/null 2>&1 \
        && GOFLAGS= go mod download -json "golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.$goos-$goarch" ) \
        || die "cannot fetch golang.org/toolchain through the module proxy ($(go env GOPROXY))"
      src=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$info")
      rm -rf "$w" "$dir.tmp"; mkdir -p "$CACHE"; cp -R "$src" "$dir.tmp"; chmod -R u+w "$dir.tmp"
      chmod +x "$dir.tmp"/bin/* "$dir.tmp"/pkg/tool/*/*
      rm -rf "$dir"; mv "$dir.tmp" "$dir"
    fi
    export PATH="$dir/bin:$PATH" GOROOT="$dir" GOTOOLCHAIN=local
  fi
  GOVER=$(go env GOVERSION)
}

workdir() {
  local w; w=$(mktemp -d "${TMPDIR:-/tmp}/kthena-build.XXXXXX")
  echo "$w"
}

# --- progress -----------------------------------------------------------------------------------
# run_step NAME ESTIMATE_MINUTES FUNCTION: runs FUNCTION with the go commands' output in a log file,
# reports the elapsed time every minute (every 10 s, on one line, on a terminal), and on a failure
# prints the last lines of the log.
run_step() {
  local name=$1 estimate=$2 fn=$3 started=$SECONDS
  local logfile="$CACHE/logs/$name.log"
  mkdir -p "$CACHE/logs"
  log "building $name (usually ~$estimate min on 2 cores; go output: $logfile)"
  ( "$fn" ) >"$logfile" 2>&1 &
  local pid=$! tick=60 next
  [ -t 2 ] && tick=10
  next=$((SECONDS + tick))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      if [ -t 2 ]; then
        printf '\r[build] %s: %s elapsed (usually ~%s min)  ' "$name" "$(minutes $((SECONDS - started)))" "$estimate" >&2
      else
        log "$name: $(minutes $((SECONDS - started))) elapsed (usually ~$estimate min)"
      fi
      next=$((SECONDS + tick))
    fi
  done
  [ -t 2 ] && printf '\r\033[K' >&2
  if ! wait "$pid"; then
    log "building $name FAILED after $(minutes $((SECONDS - started))); last lines of $logfile:"
    tail -n 25 "$logfile" >&2
    exit 1
  fi
  log "$name built in $(minutes $((SECONDS - started)))"
}

# --- components ---------------------------------------------------------------------------------
# Each component has: <c>_out (its cache directory), <c>_ready (is it complete), <c>_minutes (a cold
# build's usual duration, measured on 2 cores with the components before it built) and build_<c>.
etcd_out() { echo "$CACHE/etcd-v$ETCD_VERSION-$GOVER"; }
etcd_ready() { [ -x "$(etcd_out)/etcd" ]; }
etcd_minutes=2
build_etcd() {
  local out; out=$(etcd_out)
  local w; w=$(workdir)
  ( cd "$w"; go mod init kthena-py.local/etcdbin
    go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
    mkdir -p "$out.tmp"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3 )
  rm -rf "$w" "$out"; mv "$out.tmp" "$out"
}

# A module that builds commands of k8s.io/kubernetes: the staging modules replaced by their
# published versions, and the version stamped the way the Kubernetes release build does.
k8s_module() {
  local stg="v0.${K8S_VERSION#1.}"
  go mod init kthena-py.local/k8sbin
  local info gomod m
  info=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION")
  gomod=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")
  K8S_COMMIT=$(python3 -c 'import json,sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash","unknown"))' <<<"$info")
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit -replace="$m=$m@$stg"
  done
}
k8s_ldflags() {
  local minor date ldf="-s -w" p
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitCommit=$K8S_COMMIT -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  echo "$ldf"
}

kube_out() { echo "$CACHE/k8s-v$K8S_VERSION-$GOVER"; }
kube_ready() { [ -x "$(kube_out)/kube-apiserver" ] && [ -x "$(kube_out)/kube-controller-manager" ]; }
kube_minutes=15
build_kube() {
  local out; out=$(kube_out)
  local w; w=$(workdir)
  ( cd "$w"; k8s_module
    go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION"
    mkdir -p "$out.tmp"
    go build -p 2 -trimpath -ldflags "$(k8s_ldflags)" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager )
  rm -rf "$w" "$out"; mv "$out.tmp" "$out"
}

# kubectl of the same Kubernetes version, from the same module set as kube (so a build after kube
# reuses most of its compiled packages).
kubectl_out() { echo "$CACHE/kubectl-v$K8S_VERSION-$GOVER"; }
kubectl_ready() { [ -x "$(kubectl_out)/kubectl" ]; }
kubectl_minutes=3
build_kubectl() {
  local out; out=$(kubectl_out)
  local w; w=$(workdir)
  ( cd "$w"; k8s_module
    go get -tool "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION"
    mkdir -p "$out.tmp"
    go build -p 2 -trimpath -ldflags "$(k8s_ldflags)" -o "$out.tmp/" k8s.io/kubernetes/cmd/kubectl )
  rm -rf "$w" "$out"; mv "$out.tmp" "$out"
}

kwok_out() { echo "$CACHE/kwok-v$KWOK_VERSION-$GOVER"; }
kwok_ready() { [ -x "$(kwok_out)/kwok" ] && [ -d "$(kwok_out)/stages" ]; }
kwok_minutes=2
build_kwok() {
  local out; out=$(kwok_out)
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  local src; src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage"
  mkdir -p "$out.tmp/stages"
  cp "$src/node/fast/node-initialize.yaml" "$src/pod/fast/pod-ready.yaml" \
     "$src/pod/fast/pod-complete.yaml" "$src/pod/fast/pod-delete.yaml" "$out.tmp/stages/"
  chmod -R u+w "$out.tmp"
  rm -rf "$out"; mv "$out.tmp" "$out"
}

volcano_out() { echo "$CACHE/volcano-v$VOLCANO_VERSION-apis-v$VOLCANO_APIS_VERSION-$GOVER"; }
volcano_ready() { [ -x "$(volcano_out)/vc-scheduler" ] && [ -d "$(volcano_out)/crd" ]; }
volcano_minutes=8
build_volcano() {
  local out; out=$(volcano_out)
  local w; w=$(workdir)
  ( cd "$w"; go mod init kthena-py.local/vcbin
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
    go get -tool "volcano.sh/volcano/cmd/scheduler@v$VOLCANO_VERSION"
    mkdir -p "$out.tmp/crd"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/vc-scheduler" volcano.sh/volcano/cmd/scheduler
    local src; src="$(go env GOMODCACHE)/volcano.sh/volcano@v$VOLCANO_VERSION/config/crd/volcano/bases"
    cp "$src"/scheduling.volcano.sh_podgroups.yaml "$src"/scheduling.volcano.sh_queues.yaml \
       "$src"/topology.volcano.sh_hypernodes.yaml "$src"/nodeinfo.volcano.sh_numatopologies.yaml "$out.tmp/crd/"
    chmod -R u+w "$out.tmp" )
  rm -rf "$w" "$out"; mv "$out.tmp" "$out"
}

helm_out() { echo "$CACHE/helm-v$HELM_VERSION-$GOVER"; }
helm_ready() { [ -x "$(helm_out)/helm" ]; }
helm_minutes=8
build_helm() {
  local out; out=$(helm_out) major=${HELM_VERSION%%.*}
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" go install -p 2 -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v$major/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v$major/cmd/helm@v$HELM_VERSION"
  rm -rf "$out"; mv "$out.tmp" "$out"
}

# --- main ---------------------------------------------------------------------------------------
ALL=(etcd kwok volcano kube kubectl helm)
PRINT_PATH=""
if [ "${1:-}" = --print-path ]; then
  case "${2:-}" in kubectl|helm) PRINT_PATH=$2; set -- "$2" ;; *) die "--print-path needs kubectl or helm" ;; esac
fi
components=("$@")
[ ${#components[@]} -eq 0 ] && components=("${ALL[@]}")
for c in "${components[@]}"; do
  case " go ${ALL[*]} " in *" $c "*) ;; *) die "unknown component: $c (known: go ${ALL[*]})" ;; esac
done
mkdir -p "$CACHE"
setup_go

missing=() total=0
for c in "${components[@]}"; do
  [ "$c" = go ] && continue
  if ! "${c}_ready"; then missing+=("$c"); total=$((total + ${c}_minutes)); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "to build with $GOVER: ${missing[*]} (usually ~$total min in all on 2 cores; then cached in $CACHE)"
  for c in "${missing[@]}"; do
    run_step "$c" "$((${c}_minutes))" "build_$c"
  done
  log "done in $(minutes $((SECONDS - STARTED)))"
fi
if [ -n "$PRINT_PATH" ]; then echo "$("${PRINT_PATH}_out")/$PRINT_PATH"; else echo "$CACHE"; fi
