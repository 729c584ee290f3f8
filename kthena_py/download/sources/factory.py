"""Build the adapter for a parsed source, importing its client only now."""

from __future__ import annotations

from ..config import Settings
from ..credentials import HttpCredentials
from .base import Source
from .spec import Kind, SourceSpec


def open_source(spec: SourceSpec, settings: Settings, out: str, connections: int) -> Source:
    """The adapter for ``spec``.

    Raises:
        DownloadError: ``UnsupportedSource`` (e.g. ``ms://`` without ``modelscope``) or ``InvalidArguments``.
    """
    if spec.kind is Kind.HF:
        from .hf import HfSource

        return HfSource(spec.location, settings)
    if spec.kind is Kind.S3:
        from .s3 import S3Source

        return S3Source(spec.scheme, spec.location, spec.prefix, settings, connections)
    if spec.kind is Kind.HTTP:
        from .http import HttpSource

        return HttpSource(spec.location, HttpCredentials(settings.hf_endpoint, settings.hf_token))
    if spec.kind is Kind.MODELSCOPE:
        from .modelscope import ModelScopeSource

        return ModelScopeSource(spec.location, settings, out)
    from .local import LocalSource

    return LocalSource(spec.location, pvc=spec.pvc, out=out)
