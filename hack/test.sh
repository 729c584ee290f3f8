#!/usr/bin/env bash
# Run every test tier (README command 2): lint, unit, compiled (the unit and envtest tiers on the mypyc build),
# envtest, cluster.
# Works on a fresh machine with Python >= 3.11 and any Go: installs tox into .venv, builds the
# control-plane binaries and tools that are missing (cached outside the repo; the build script says
# what it builds and how long it takes, and nothing when all is cached), then runs the tox envs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/tox ]; then
  echo "== bootstrapping .venv with tox" >&2
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "tox>=4"
fi

if ! command -v prometheus >/dev/null 2>&1; then
  # The autoscaler's Prometheus metric source is tested against a real Prometheus server.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing prometheus (Debian package)" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "== prometheus not found and cannot be installed here; the Prometheus-source test will fail" >&2
  fi
fi

hack/build-controlplane.sh >/dev/null

echo "== running tox envs: ${TOX_ENVS:-lint,unit,compiled,envtest,cluster}" >&2
exec .venv/bin/tox run -e "${TOX_ENVS:-lint,unit,compiled,envtest,cluster}" -- "$@"
