"""Semantic validation of a ModelCache (our validating webhook and ``kthena-py validate``).

Guarantees: pure, given the set of supported sources (:func:`supported_schemes`, which only asks whether the
optional ModelScope client is importable). The schema (pydantic) has already checked exactly one storage kind
and the digests' form; these rules need more than one field or the stored object:

* ``spec.source`` must use a scheme the downloader supports (``hf://`` or a bare ``org/name`` repo id,
  ``s3://`` and ``obs://`` (S3-compatible), ``http(s)://``, ``pvc://``; ``ms://`` only when the ModelScope client
  is installed): anything else is refused at admission with the schemes it could be, not at download time;
* with ``spec.files`` set, every ``spec.fileSHA256`` key is one of the files (a digest of a file that is never
  downloaded could never be checked);
* on UPDATE, ``spec.storage`` is immutable (a changed storage is a new cache; the API server's CEL rule says the
  same, :data:`kthena_py.api.crdgen.rules.STORAGE_IMMUTABLE_MESSAGE`).
"""

from __future__ import annotations

import functools
import importlib.util
import re

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import ModelCache
from kthena_py.api.validation.errors import ErrorType, FieldError, forbidden, invalid

__all__ = [
    "BASE_SCHEMES",
    "STORAGE_IMMUTABLE_MESSAGE",
    "source_error",
    "supported_schemes",
    "validate_modelcache",
]

BASE_SCHEMES: tuple[str, ...] = ("hf://", "s3://", "obs://", "http://", "https://", "pvc://")
"""Source schemes the downloader always supports (plus a bare Hugging Face repo id)."""
MODELSCOPE_SCHEME = "ms://"
STORAGE_IMMUTABLE_MESSAGE = "storage is immutable: a changed storage is a new cache (create another ModelCache)"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@functools.cache
def supported_schemes() -> tuple[str, ...]:
    """The source schemes of this installation: :data:`BASE_SCHEMES`, and ``ms://`` with the ModelScope client."""
    if importlib.util.find_spec("modelscope") is not None:
        return (*BASE_SCHEMES, MODELSCOPE_SCHEME)
    return BASE_SCHEMES


def source_error(source: str, schemes: tuple[str, ...]) -> FieldError | None:
    """Return the error of an unsupported ``spec.source`` (``None`` when the downloader can fetch it).

    Args:
        source: The source as written.
        schemes: The supported schemes (each ``<scheme>://``).
    """
    path = "spec.source"
    match = _SCHEME.match(source)
    if match is None:
        if _REPO_ID.match(source):
            return None
        return invalid(path, source, "must be <scheme>://... or a Hugging Face repo id org/name")
    scheme = f"{match.group(1)}://"
    if scheme not in schemes:
        hint = " (this installation's downloader has no ModelScope client)" if scheme == MODELSCOPE_SCHEME else ""
        message = (
            f"unsupported source scheme {scheme}{hint}; supported: {', '.join(schemes)}, "
            "or a Hugging Face repo id org/name"
        )
        return FieldError(path, ErrorType.NOT_SUPPORTED, message, source)
    if not source[len(scheme) :].strip("/"):
        return invalid(path, source, f"{scheme} needs a location after the scheme")
    return None


def validate_modelcache(cache: ModelCache, old: ModelCache | None = None) -> list[FieldError]:
    """Validate a parsed ModelCache (and, on UPDATE, the stored one); return the field errors."""
    spec = cache.spec
    errors: list[FieldError] = []
    problem = source_error(spec.source, supported_schemes())
    if problem is not None:
        errors.append(problem)
    if spec.files is not None and spec.file_sha256 is not None:
        listed = set(spec.files)
        for name in sorted(spec.file_sha256):
            if name not in listed:
                errors.append(invalid(f"spec.fileSHA256[{name}]", name, "must be one of spec.files"))
    if old is not None and to_dict(old.spec.storage) != to_dict(spec.storage):
        errors.append(forbidden("spec.storage", STORAGE_IMMUTABLE_MESSAGE))
    return errors
