"""Where the downloader and runtime images of a booster's pods come from.

Guarantees: an image given on the command line wins; otherwise it is read, once per process, from ConfigMap
``model-booster-controller-config`` in the manager's own namespace (keys ``model_serving_downloader_image`` and
``model_serving_runtime_image``), as Kthena's controller does at start-up; a missing ConfigMap, key or
permission means Kthena's defaults. A failure to reach the API server is raised (the reconcile is retried),
never cached.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from kthena_py.kube import Forbidden, KubeApi, NotFound
from kthena_py.kube.resources import CONFIGMAPS
from kthena_py.plan.modelbooster import Images

__all__ = ["CONFIGMAP", "DOWNLOADER_KEY", "RUNTIME_KEY", "ImageSource", "Settings"]

CONFIGMAP = "model-booster-controller-config"
DOWNLOADER_KEY = "model_serving_downloader_image"
RUNTIME_KEY = "model_serving_runtime_image"

log = structlog.get_logger("kthena_py.modelbooster")


@dataclass(frozen=True)
class Settings:
    """ModelBooster controller settings (the manager's ``--modelbooster-*`` flags).

    Attributes:
        downloader_image: The downloader image; ``None`` reads the ConfigMap.
        runtime_image: The runtime sidecar image; ``None`` reads the ConfigMap.
        config_namespace: The namespace of the ConfigMap (the manager's own).
    """

    downloader_image: str | None = None
    runtime_image: str | None = None
    config_namespace: str = "kthena-system"


class ImageSource:
    """The images to render, resolved on first use and then kept for the life of the process."""

    def __init__(self, client: KubeApi, settings: Settings) -> None:
        self._client = client
        self._settings = settings
        self._images: Images | None = None
        self._lock = asyncio.Lock()

    async def images(self) -> Images:
        """Return the images (reading the ConfigMap the first time, unless both are set by flags).

        Raises:
            ApiError: The API server could not answer (not cached; the next call tries again).
        """
        if self._images is not None:
            return self._images
        async with self._lock:
            if self._images is None:
                self._images = await self._resolve()
            return self._images

    async def _resolve(self) -> Images:
        settings = self._settings
        data: dict[str, str] = {}
        if settings.downloader_image is None or settings.runtime_image is None:
            try:
                cm = await self._client.get(CONFIGMAPS, CONFIGMAP, settings.config_namespace)
                data = {k: v for k, v in (cm.get("data") or {}).items() if isinstance(v, str) and v}
            except (NotFound, Forbidden) as exc:
                log.info("using default images", configmap=f"{settings.config_namespace}/{CONFIGMAP}", reason=str(exc))
        defaults = Images()
        images = Images(
            downloader=settings.downloader_image or data.get(DOWNLOADER_KEY) or defaults.downloader,
            runtime=settings.runtime_image or data.get(RUNTIME_KEY) or defaults.runtime,
        )
        log.info("modelbooster images", downloader=images.downloader, runtime=images.runtime)
        return images
