#!/usr/bin/env python3
"""Vendor the Kubernetes core/v1 schemas that kthena_py's CRDs embed (PodSpec and friends).

Starts a throw-away envtest control plane (etcd + kube-apiserver from ~/.cache/kthena-py/bin), reads
``/openapi/v3/api/v1`` once, inlines each root type with :func:`kthena_py.api.crdgen.openapi.inline_schema` and
writes ``kthena_py/api/crdgen/data/core_v1.json``. Run it when moving to another Kubernetes minor version, then
regenerate the CRDs with ``kthena-py crds``.

    .venv/bin/python hack/vendor-openapi.py [--from-file openapi-v3-api-v1.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kthena_py.api.crdgen.openapi import inline_schema  # noqa: E402

OUTPUT = ROOT / "kthena_py" / "api" / "crdgen" / "data" / "core_v1.json"
ROOTS = [
    "io.k8s.api.core.v1.PodSpec",
    "io.k8s.api.core.v1.ResourceRequirements",
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.Toleration",
    "io.k8s.api.core.v1.EnvVar",
    "io.k8s.api.core.v1.EnvFromSource",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
]


def _fetch() -> tuple[dict[str, Any], str]:
    from kthena_py.testing.controlplane import EnvTest

    with tempfile.TemporaryDirectory(prefix="kthena-py-openapi-") as tmp, EnvTest(Path(tmp) / "env") as env:
        status, document = env.client.raw("GET", "/openapi/v3/api/v1")
        if status != 200 or not isinstance(document, dict):
            raise SystemExit(f"GET /openapi/v3/api/v1 answered {status}")
        status, version = env.client.raw("GET", "/version")
        return document, str(version.get("gitVersion", "unknown")) if isinstance(version, dict) else "unknown"


def main() -> int:
    """Fetch (or read) the OpenAPI document and write the vendored schemas."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-file", type=Path, help="use a saved /openapi/v3/api/v1 document instead")
    parser.add_argument("--kubernetes-version", default=None, help="version to record with --from-file")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if args.from_file:
        document, version = json.loads(args.from_file.read_text()), args.kubernetes_version or "unknown"
    else:
        document, version = _fetch()
    components = document["components"]["schemas"]
    data = {
        "kubernetesVersion": version,
        "source": "/openapi/v3/api/v1",
        "schemas": {name: inline_schema(components, name) for name in ROOTS},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {args.output.relative_to(ROOT)} ({version}, {args.output.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
