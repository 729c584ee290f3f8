"""Generate the CRDs of ``workload.serving.volcano.sh/v1alpha1`` (and docs/api.md) from the API models.

Pure: builds plain dicts and strings from :mod:`kthena_py.api` and package data (the vendored Kubernetes
schemas in ``data/core_v1.json``, the reference's descriptions in ``data/descriptions.json``); writing files
is the job of ``kthena-py crds`` (:mod:`kthena_py.cli.crds`).

* :func:`build_crds` returns ``{file name: CRD}`` for ModelServing, AutoscalingPolicy and ModelBooster;
  :func:`render_yaml` renders one as committed under ``manifests/crd/``.
* :func:`render_api_docs` renders docs/api.md.
* :mod:`~kthena_py.api.crdgen.schema` maps models to structural schemas, :mod:`~kthena_py.api.crdgen.rules`
  holds the CEL rules, :mod:`~kthena_py.api.crdgen.openapi` turns Kubernetes' OpenAPI into embeddable
  schemas (used by ``hack/vendor-openapi.py``).
"""

from kthena_py.api.crdgen.crd import (
    KIND_SPECS,
    KindSpec,
    build_crd,
    build_crds,
    file_name,
    render_yaml,
    rendered_crds,
)
from kthena_py.api.crdgen.docs import render_api_docs
from kthena_py.api.crdgen.schema import kind_schema

__all__ = [
    "KIND_SPECS",
    "KindSpec",
    "build_crd",
    "build_crds",
    "file_name",
    "kind_schema",
    "render_api_docs",
    "render_yaml",
    "rendered_crds",
]
