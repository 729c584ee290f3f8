"""``http(s)://URL``: one file, named after the last segment of the URL's path.

Guarantees: one HEAD lists it (size from ``Content-Length``, identity from the ETag, else the size); user-info
in the URL becomes Basic authentication for that URL's origin only and is stripped from the URL itself. The
body is fetched by the blocking client of :mod:`.httpget` (a :class:`~.base.BlockingSource`).
"""

from __future__ import annotations

import asyncio
import posixpath
from urllib.parse import unquote, urlsplit

from kthena_py.sourceid import SourceIdentity

from ..credentials import HttpCredentials, origin, split_userinfo
from ..plan import RemoteFile
from .base import Listing, Stream, body_stream
from .httpget import HttpBody, HttpGetter

STREAM_BLOCK = 4 * 1024 * 1024


def file_name(url: str) -> str:
    """The file name a URL is saved under."""
    name = posixpath.basename(unquote(urlsplit(url).path))
    return name if name not in ("", ".", "..") else "download"


class HttpSource:
    """One file over HTTP(S)."""

    def __init__(self, url: str, hf: HttpCredentials) -> None:
        clean, user, password = split_userinfo(url)
        self._url = clean
        creds = HttpCredentials(
            hf_endpoint=hf.hf_endpoint,
            hf_token=hf.hf_token,
            basic_origin=origin(clean) if user is not None else None,
            basic_user=user,
            basic_password=password,
        )
        self._getter = HttpGetter(creds)

    async def list(self) -> Listing:
        """HEAD the URL."""
        head = await asyncio.to_thread(self._getter.head, self._url)
        identity = f"etag:{head.etag}" if head.etag else f"size:{head.size}"
        source_identity = SourceIdentity(head.etag, head.size, head.last_modified)
        return Listing(
            (RemoteFile(file_name(self._url), head.size, None, identity, self._url),),
            identity=None if source_identity.empty else source_identity,
        )

    def open_blocking(self, file: RemoteFile, offset: int) -> HttpBody:
        """GET from ``offset`` (resuming only the version the listing saw: ``If-Range`` with its ETag)."""
        etag = file.identity[5:] if file.identity.startswith("etag:") else None
        return self._getter.open(file.locator, offset, etag)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """GET from ``offset``, as an asynchronous stream."""
        return body_stream(await asyncio.to_thread(self.open_blocking, file, offset), STREAM_BLOCK)

    async def close(self) -> None:
        """Nothing to release: every body owns its connection."""
