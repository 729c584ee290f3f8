"""``ms://ORG/REPO``: ModelScope, only when the ``modelscope`` package is installed (it is not a dependency).

Guarantees: without ``modelscope`` the source is ``UnsupportedSource`` with a message that says so. With it,
``modelscope.snapshot_download`` fetches the revision into a staging directory inside the output directory
(``.kthena-ms-staging``), which is then staged like a local source: every file is hashed while it is moved
into place, checked against ``--sha256``/``--file-sha256``, and the marker is written as for any source. This
is the one source where hashing is a second pass: ModelScope's client does the transfer.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
from typing import Any

from ..config import Settings
from ..plan import RemoteFile
from ..result import DownloadError, Reason
from .base import Listing, Stream
from .local import LocalSource, walk

STAGING = ".kthena-ms-staging"


def require_modelscope() -> Any:
    """The ``modelscope`` module.

    Raises:
        DownloadError: ``UnsupportedSource`` when it is not installed.
    """
    if importlib.util.find_spec("modelscope") is None:
        raise DownloadError(
            Reason.UNSUPPORTED_SOURCE,
            "unsupported source: ms:// needs the modelscope package, which is not installed in this image",
        )
    return importlib.import_module("modelscope")


class ModelScopeSource:
    """A ModelScope repository, fetched by ModelScope's own client into a staging directory."""

    def __init__(self, repo_id: str, settings: Settings, out: str) -> None:
        self._module = require_modelscope()
        self._repo_id = repo_id
        self._revision = settings.ms_revision
        self._token = settings.ms_token
        self._staging = os.path.join(out, STAGING)
        self._local = LocalSource(self._staging, pvc=False, out=out)

    def _snapshot(self) -> None:
        if self._token is not None:
            os.environ["MODELSCOPE_API_TOKEN"] = self._token.reveal()
        kwargs: dict[str, Any] = {"local_dir": self._staging}
        if self._revision:
            kwargs["revision"] = self._revision
        self._module.snapshot_download(self._repo_id, **kwargs)

    async def list(self) -> Listing:
        """Fetch the snapshot, then list it."""
        try:
            await asyncio.to_thread(self._snapshot)
        except Exception as exc:  # ModelScope's errors have no documented base class
            raise DownloadError(Reason.DOWNLOAD_FAILED, f"ms://{self._repo_id}: {type(exc).__name__}") from None
        files = await asyncio.to_thread(walk, self._staging, directory_required=True)
        return Listing(tuple(files), revision=self._revision)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Read the staged file."""
        return await self._local.open(file, offset)

    async def close(self) -> None:
        """Nothing to release (the staging directory is removed by the run when it completes)."""
