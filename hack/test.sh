#!/usr/bin/env bash
# Run every test tier (README command 2): lint, unit, envtest, cluster.
# Works on a fresh machine with Python >= 3.11 and Go: installs tox into .venv, builds the
# control-plane binaries that are missing (cached outside the repo), then runs the tox envs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/tox ]; then
  echo "== bootstrapping .venv with tox" >&2
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "tox>=4"
fi

echo "== building missing control-plane binaries" >&2
hack/build-controlplane.sh >/dev/null

echo "== running tox envs: ${TOX_ENVS:-lint,unit,envtest,cluster}" >&2
exec .venv/bin/tox run -e "${TOX_ENVS:-lint,unit,envtest,cluster}" -- "$@"
