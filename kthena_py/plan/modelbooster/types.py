"""Value types shared by the ModelBooster expander and its controller."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_DOWNLOADER_IMAGE", "DEFAULT_RUNTIME_IMAGE", "Images"]

DEFAULT_DOWNLOADER_IMAGE = "kthena/downloader:latest"
DEFAULT_RUNTIME_IMAGE = "kthena/runtime:latest"


@dataclass(frozen=True)
class Images:
    """The images of the downloader init container and the runtime sidecar (Kthena's defaults)."""

    downloader: str = DEFAULT_DOWNLOADER_IMAGE
    runtime: str = DEFAULT_RUNTIME_IMAGE
