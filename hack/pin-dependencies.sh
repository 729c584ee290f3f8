#!/usr/bin/env bash
# Refresh constraints.txt: the exact versions of kthena-py's runtime dependencies (the closure of
# pyproject.toml's [project].dependencies and of the `download` extra), resolved fresh in a throwaway virtualenv with the current
# Python. The Containerfile and hack/local-up.sh install with `-c constraints.txt`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
w=$(mktemp -d "${TMPDIR:-/tmp}/kthena-pin.XXXXXX")
trap 'rm -rf "$w"' EXIT
"$PY" -m venv "$w/venv"
"$w/venv/bin/python" -m pip install --quiet --upgrade pip
"$w/venv/bin/python" -m pip install --quiet '.[download]'
{
  echo "# Runtime dependencies of kthena-py and of its download extra, pinned. Regenerate with hack/pin-dependencies.sh (do not edit)."
  echo "# Resolved with Python $("$w/venv/bin/python" -c 'import sys; print(".".join(map(str, sys.version_info[:2])))') on $(uname -s)/$(uname -m)."
  "$w/venv/bin/python" -m pip freeze --exclude kthena-py --exclude pip --exclude setuptools --exclude wheel | LC_ALL=C sort -f
} > constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)" >&2
