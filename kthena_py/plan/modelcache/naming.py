"""Names and the fingerprint of a ModelCache's children: deterministic, so a restart never stages twice.

Guarantees (pure):

* :func:`fingerprint` depends only on what decides the staged bytes and where they go: ``source``, ``revision``,
  ``files`` (as a set), ``sha256``, ``fileSHA256`` and ``storage``. ``placement``, ``prefetch``, ``maxWorkers``
  and the secret change how a download runs, not what it stages: they never restage a Ready cache.
* Every name is a function of the cache's name, the fingerprint, the node (node-local) and the attempt, so a
  manager that restarts mid-download computes the name of the Job that already runs, and its create is refused
  as AlreadyExists instead of starting a second one.
* :func:`bounded_name` keeps names within ``limit`` characters (63 for Jobs and PodGroups: a Job's name becomes
  its pods' ``job-name`` label), replacing the tail with a hash of the whole name when too long, so two
  different long names never collide by truncation; :func:`label_value` does the same for label values.
"""

from __future__ import annotations

import hashlib
import json

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import ModelCacheSpec

__all__ = [
    "DNS_LABEL_MAX",
    "FINGERPRINT_LENGTH",
    "bounded_name",
    "claim_name",
    "cleanup_job_name",
    "download_job_name",
    "fingerprint",
    "label_value",
]

DNS_LABEL_MAX = 63
FINGERPRINT_LENGTH = 16
"""Hex digits of a fingerprint (64 bits: a label value, readable in ``kubectl get``)."""
_SHORT = 8
_HASH = 8


def fingerprint(spec: ModelCacheSpec) -> str:
    """Return the fingerprint of the staging spec (see the module docstring)."""
    staged = {
        "source": spec.source,
        "revision": spec.revision,
        "files": sorted(set(spec.files)) if spec.files is not None else None,
        "sha256": spec.sha256,
        "fileSHA256": dict(sorted((spec.file_sha256 or {}).items())) or None,
        "storage": to_dict(spec.storage),
    }
    text = json.dumps(staged, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_LENGTH]


def bounded_name(*parts: str, limit: int = DNS_LABEL_MAX) -> str:
    """Join ``parts`` with ``-``; when longer than ``limit``, keep a prefix and append a hash of the whole name."""
    name = "-".join(part for part in parts if part)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH]
    head = name[: limit - _HASH - 1].rstrip("-.")
    return f"{head}-{digest}"


def label_value(value: str) -> str:
    """A label value standing for ``value`` (itself when short enough, else hash-shortened)."""
    return bounded_name(value)


def download_job_name(cache: str, fp: str, node: str | None = None, attempt: int = 0) -> str:
    """The download Job (and its PodGroup) of one attempt: ``<cache>-<fp8>[-<node>][-<attempt>]``."""
    return bounded_name(cache, fp[:_SHORT], node or "", str(attempt) if attempt else "")


def cleanup_job_name(cache: str, fp: str, node: str | None = None) -> str:
    """The cleanup Job that removes the model directory: ``<cache>-rm-<fp8>[-<node>]``."""
    return bounded_name(cache, "rm", fp[:_SHORT], node or "")


def claim_name(cache: str) -> str:
    """The claim a ``volumeClaimTemplate`` cache creates: ``<cache>-cache``."""
    return bounded_name(cache, "cache", limit=253)
