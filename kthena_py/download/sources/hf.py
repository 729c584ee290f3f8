"""``hf://ORG/REPO`` and bare ``ORG/REPO``: a Hugging Face repository, through ``huggingface_hub``.

Guarantees:

* the listing is one ``HfApi.model_info(..., files_metadata=True)`` call at ``HF_ENDPOINT`` (or ``hf_endpoint``):
  it resolves the revision to a commit and gives every file's size and, for LFS files, the hub's sha256,
  which the transfer then checks;
* bytes are fetched from the commit's resolve URL (``huggingface_hub.hf_hub_url``) by our own client
  (:mod:`.httpget`; this is a :class:`~.base.BlockingSource`), so the digest is computed while streaming; the
  token is sent only to the hub's origin, at every redirect hop (the hub sends large files to a CDN on another
  host: that hop gets no token);
* the token is given to ``huggingface_hub`` explicitly (``False`` when there is none), so no token from the
  machine's cache is picked up implicitly.
"""

from __future__ import annotations

import asyncio
from typing import Any

from huggingface_hub import HfApi, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ..config import Settings
from ..credentials import HttpCredentials
from ..plan import RemoteFile
from ..result import DownloadError, Reason
from .base import Listing, Stream, body_stream
from .httpget import HttpBody, HttpGetter

STREAM_BLOCK = 4 * 1024 * 1024


def _status(exc: HfHubHTTPError) -> int | None:
    response: Any = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


class HfSource:
    """A Hugging Face model repository."""

    def __init__(self, repo_id: str, settings: Settings) -> None:
        self._repo_id = repo_id
        self._endpoint = settings.hf_endpoint
        self._revision = settings.hf_revision
        self._token = settings.hf_token
        creds = HttpCredentials(hf_endpoint=self._endpoint, hf_token=self._token)
        self._getter = HttpGetter(creds, user_agent="kthena-py-download")

    def _model_info(self) -> Any:
        api = HfApi(endpoint=self._endpoint, token=self._token.reveal() if self._token else False)
        return api.model_info(self._repo_id, revision=self._revision, files_metadata=True)

    async def list(self) -> Listing:
        """Resolve the revision and list the files with sizes and LFS digests."""
        where = f"hf://{self._repo_id}" + (f"@{self._revision}" if self._revision else "")
        try:
            info = await asyncio.to_thread(self._model_info)
        except GatedRepoError:
            raise DownloadError(
                Reason.ACCESS_DENIED, f"{where}: gated repository (token missing or not granted)"
            ) from None
        except RevisionNotFoundError:
            raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{where}: revision not found") from None
        except RepositoryNotFoundError:
            raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{where}: repository not found (or private)") from None
        except HfHubHTTPError as exc:
            status = _status(exc)
            if status in (401, 403):
                raise DownloadError(Reason.ACCESS_DENIED, f"{where}: HTTP {status}") from None
            raise DownloadError(Reason.DOWNLOAD_FAILED, f"{where}: hub answered HTTP {status}") from None
        except Exception as exc:  # the hub client's connection errors have no common base class
            raise DownloadError(
                Reason.DOWNLOAD_FAILED, f"{where}: cannot reach the hub ({type(exc).__name__})"
            ) from None
        commit = info.sha or self._revision or "main"
        files = []
        for sibling in info.siblings or []:
            lfs = sibling.lfs
            size = lfs.size if lfs is not None else sibling.size
            files.append(
                RemoteFile(
                    name=sibling.rfilename,
                    size=size,
                    sha256=lfs.sha256.lower() if lfs is not None and lfs.sha256 else None,
                    identity=f"{commit}:{sibling.blob_id or (lfs.sha256 if lfs else '')}",
                    locator=hf_hub_url(self._repo_id, sibling.rfilename, revision=commit, endpoint=self._endpoint),
                )
            )
        return Listing(tuple(files), revision=info.sha)

    def open_blocking(self, file: RemoteFile, offset: int) -> HttpBody:
        """GET the resolve URL of the listed commit (ranged when resuming), blocking."""
        return self._getter.open(file.locator, offset)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Stream from the resolve URL (ranged when resuming)."""
        return body_stream(await asyncio.to_thread(self.open_blocking, file, offset), STREAM_BLOCK)

    async def close(self) -> None:
        """Nothing to release: every body owns its connection."""
