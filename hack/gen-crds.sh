#!/usr/bin/env bash
# Regenerate the CRDs (manifests/crd/ and the Helm chart's charts/kthena-py/crds/) and the API reference (docs/api.md) from kthena_py's API models.
# `hack/gen-crds.sh --check` writes nothing and fails if a generated file is out of date (as the unit test does).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m kthena_py crds --output-dir manifests/crd --api-docs docs/api.md "$@"
