#!/usr/bin/env bash
# Pin the Containerfile's base image to the digest its tag points at now (the multi-arch index, so
# every platform stays buildable). Usage: hack/pin-base-image.sh [IMAGE]   (default python:3.11-slim)
# Needs one of skopeo, crane or docker (buildx); rewrites the `ARG PYTHON_IMAGE=` line.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${1:-python:3.11-slim}
ref=$IMAGE
case "$ref" in */*) ;; *) ref=docker.io/library/$ref ;; esac
if command -v skopeo >/dev/null 2>&1; then
  digest=$(skopeo inspect --raw "docker://$ref" | sha256sum | cut -d' ' -f1); digest=sha256:$digest
elif command -v crane >/dev/null 2>&1; then
  digest=$(crane digest "$ref")
elif command -v docker >/dev/null 2>&1; then
  digest=$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest.Digest}}' | tr -d '"')
else
  echo "need skopeo, crane or docker to look up the digest of $IMAGE" >&2
  exit 1
fi
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "unexpected digest: $digest" >&2; exit 1; }
sed -i "s|^ARG PYTHON_IMAGE=.*|ARG PYTHON_IMAGE=$IMAGE@$digest|" Containerfile
grep -n '^ARG PYTHON_IMAGE=' Containerfile
