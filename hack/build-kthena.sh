#!/usr/bin/env bash
# Build Kthena's own Go controller-manager for side-by-side benchmarks (bench/converge.py
# --compare-kthena), into the binary cache outside the repository. Never committed.
#
# The Go module proxy does not serve github.com/volcano-sh/kthena, so the source comes from a checkout:
#   KTHENA_SRC=DIR       a checked-out Kthena source tree, or
#   KTHENA_GIT_DIR=DIR   a git directory (bare is fine); its HEAD is exported to a scratch tree.
# Output: CACHE/kthena-<commit>-<go version>/ with kthena-controller-manager and crds/ (Kthena's own
# workload CRDs, from charts/kthena/charts/workload/crds). Prints the binary's path on the last line.
# Usually ~14 min on 2 cores; its dependencies come through the Go module proxy.
set -euo pipefail

CACHE=${KTHENA_PY_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kthena-py/bin}
log() { printf '[build-kthena %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "no 'go' on PATH"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

scratch=""
cleanup() { [ -n "$scratch" ] && rm -rf "$scratch"; }
trap cleanup EXIT

if [ -n "${KTHENA_SRC:-}" ]; then
  src=$KTHENA_SRC
  commit=$(git -C "$src" rev-parse --short=8 HEAD 2>/dev/null || echo local)
elif [ -n "${KTHENA_GIT_DIR:-}" ]; then
  commit=$(git --git-dir="$KTHENA_GIT_DIR" rev-parse --short=8 HEAD)
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/kthena-src.XXXXXX")
  git --git-dir="$KTHENA_GIT_DIR" archive HEAD | tar -x -C "$scratch"
  src=$scratch
else
  die "set KTHENA_SRC (a Kthena checkout) or KTHENA_GIT_DIR (its git directory)"
fi
[ -f "$src/cmd/kthena-controller-manager/main.go" ] || die "$src is not a Kthena source tree"

gover=$(cd "$src" && go env GOVERSION)
out="$CACHE/kthena-$commit-$gover"
if [ -x "$out/kthena-controller-manager" ] && [ -d "$out/crds" ]; then
  log "already built: $out"
  echo "$out/kthena-controller-manager"
  exit 0
fi
mkdir -p "$CACHE/logs"
logfile="$CACHE/logs/kthena.log"
log "building Kthena $commit with $gover (usually ~14 min on 2 cores; go output: $logfile)"
started=$SECONDS
rm -rf "$out.tmp"; mkdir -p "$out.tmp/crds"
if ! ( cd "$src" && go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/kthena-controller-manager" \
       ./cmd/kthena-controller-manager ) >"$logfile" 2>&1; then
  tail -n 25 "$logfile" >&2
  die "go build failed after $((SECONDS - started)) s"
fi
cp "$src"/charts/kthena/charts/workload/crds/*.yaml "$out.tmp/crds/"
rm -rf "$out"; mv "$out.tmp" "$out"
log "built in $((SECONDS - started)) s: $out"
echo "$out/kthena-controller-manager"
