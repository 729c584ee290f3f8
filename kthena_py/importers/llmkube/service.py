"""An InferenceService's ``endpoint`` -> a Service in front of its ModelServing's entry pods.

Guarantees: one Service per InferenceService, named like it (LLMKube always creates one), selecting the
ModelServing's entry pods by Kthena's labels, port ``endpoint.port`` (8080 by default) to the engine's named
port ``http``, type ``endpoint.type`` (ClusterIP by default).
"""

from __future__ import annotations

from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.documents import integer, string
from kthena_py.importers.llmkube.common import emitted_metadata
from kthena_py.vocab.labels import ENTRY_VALUE, SERVING_ENTRY, SERVING_NAME

__all__ = ["DEFAULT_ENDPOINT_PORT", "endpoint_service"]

DEFAULT_ENDPOINT_PORT = 8080


def endpoint_service(doc: ImportDocument) -> dict[str, Any]:
    """The Service of ``doc``'s endpoint."""
    port = integer(doc, "spec.endpoint.port") or DEFAULT_ENDPOINT_PORT
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": emitted_metadata(doc),
        "spec": {
            "type": string(doc, "spec.endpoint.type") or "ClusterIP",
            "selector": {SERVING_NAME: doc.name, SERVING_ENTRY: ENTRY_VALUE},
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
