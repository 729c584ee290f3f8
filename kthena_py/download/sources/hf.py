"""``hf://ORG/REPO`` and bare ``ORG/REPO``: a Hugging Face repository, through ``huggingface_hub``.

Guarantees:

* the listing is one request at ``HF_ENDPOINT`` (or ``hf_endpoint``): the model-info request
  ``HfApi.model_info(..., files_metadata=True)`` sends, made by our own client and read by :mod:`.hubapi`
  (so the common run never loads the hub client's API module, about 0.2 s); it resolves the revision to a
  commit and gives every file's size and, for LFS files, the hub's sha256, which the transfer then checks;
* any other answer (an error status, or JSON that :mod:`.hubapi` does not recognise) is left to
  ``huggingface_hub``: the same request is made again by ``HfApi.model_info``, whose errors (gated, no such
  repository or revision, 401/403) decide the failure's reason; a hub that cannot be reached at all fails at
  once as ``DownloadFailed``;
* bytes are fetched from the commit's resolve URL (the one ``huggingface_hub.hf_hub_url`` gives) by our own client
  (:mod:`.httpget`; this is a :class:`~.base.BlockingSource`), so the digest is computed while streaming; the
  token is sent only to the hub's origin, at every redirect hop (the hub sends large files to a CDN on another
  host: that hop gets no token);
* the token is given to ``huggingface_hub`` explicitly (``False`` when there is none), so no token from the
  machine's cache is picked up implicitly.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..config import Settings
from ..credentials import HttpCredentials
from ..plan import RemoteFile
from ..result import DownloadError, Reason
from .base import Listing, Stream, TransientError, body_stream
from .httpget import BROKEN, HttpBody, HttpGetter
from .hubapi import info_url, listing_of, resolve_url

STREAM_BLOCK = 4 * 1024 * 1024


def _status(exc: Exception) -> int | None:
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

    def _where(self) -> str:
        return f"hf://{self._repo_id}" + (f"@{self._revision}" if self._revision else "")

    def _list_directly(self) -> Listing | None:
        """The listing from our own model-info request; ``None`` when the answer is for the hub client to read."""
        url = info_url(self._endpoint, self._repo_id, self._revision)
        try:
            connection, response, _ = self._getter.request("GET", url, {"Accept": "application/json"})
        except TransientError as exc:
            raise DownloadError(Reason.DOWNLOAD_FAILED, f"{self._where()}: cannot reach the hub ({exc})") from None
        try:
            if response.status != 200:
                return None
            body = response.read()
        except BROKEN as exc:
            raise DownloadError(
                Reason.DOWNLOAD_FAILED, f"{self._where()}: cannot reach the hub ({type(exc).__name__})"
            ) from None
        finally:
            connection.close()
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return listing_of(data, self._repo_id, self._endpoint, self._revision)

    def _list_with_hub_client(self) -> Listing:
        """The listing as ``huggingface_hub`` reads it, its errors mapped to reasons (loads the hub client)."""
        from huggingface_hub import HfApi
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        where = self._where()
        api = HfApi(endpoint=self._endpoint, token=self._token.reveal() if self._token else False)
        try:
            info = api.model_info(self._repo_id, revision=self._revision, files_metadata=True)
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
        return listing_from_model_info(info, self._repo_id, self._endpoint, self._revision)

    def _list(self) -> Listing:
        listing = self._list_directly()
        return listing if listing is not None else self._list_with_hub_client()

    async def list(self) -> Listing:
        """Resolve the revision and list the files with sizes and LFS digests."""
        return await asyncio.to_thread(self._list)

    def open_blocking(self, file: RemoteFile, offset: int) -> HttpBody:
        """GET the resolve URL of the listed commit (ranged when resuming), blocking."""
        return self._getter.open(file.locator, offset)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """Stream from the resolve URL (ranged when resuming)."""
        return body_stream(await asyncio.to_thread(self.open_blocking, file, offset), STREAM_BLOCK)

    async def close(self) -> None:
        """Nothing to release: every body owns its connection."""


def listing_from_model_info(info: Any, repo_id: str, endpoint: str, revision: str | None) -> Listing:
    """The listing in the hub client's ``ModelInfo`` (the same rules as :func:`.hubapi.listing_of`)."""
    commit = info.sha or revision or "main"
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
                locator=resolve_url(endpoint, repo_id, commit, sibling.rfilename),
            )
        )
    return Listing(tuple(files), revision=info.sha)
