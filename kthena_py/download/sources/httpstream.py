"""Streaming HTTP GETs with ranges and per-hop credentials (aiohttp), shared by the http and hf sources.

Guarantees:

* redirects are followed here, one hop at a time (at most :data:`MAX_REDIRECTS`), and the authentication
  headers of every hop come from :func:`~kthena_py.download.credentials.auth_headers` for *that* hop's URL: a
  token meant for the hub is not sent to the host the hub redirects to;
* a ranged read asks ``Range: bytes=N-`` with ``If-Range`` when an ETag is known; a ``200`` answer means the
  source sent the whole file, and :class:`~.base.Stream` says it starts at 0;
* bytes are handed on as the socket delivers them, without copying (the transfer layer batches them for
  hashing and writing); content is never decoded (``Accept-Encoding: identity``);
* 404/410 are ``SourceNotFound``, 401/403 ``AccessDenied``, 408/429/5xx and connection errors transient.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin

import aiohttp

from ..credentials import HttpCredentials, auth_headers, sanitize_source
from ..result import DownloadError, Reason
from .base import Stream, TransientError

MAX_REDIRECTS = 10
READ_BUFSIZE = 4 * 1024 * 1024
_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True)
class Head:
    """What a HEAD (or the start of a GET) says about a file."""

    url: str
    size: int | None
    etag: str | None
    accept_ranges: bool


def _classify(status: int, url: str) -> Exception:
    where = sanitize_source(url)
    if status in (404, 410):
        return DownloadError(Reason.SOURCE_NOT_FOUND, f"{where}: HTTP {status}")
    if status in (401, 403):
        return DownloadError(Reason.ACCESS_DENIED, f"{where}: HTTP {status} (missing or wrong credentials?)")
    if status in (408, 429) or status >= 500:
        return TransientError(f"{where}: HTTP {status}")
    return DownloadError(Reason.DOWNLOAD_FAILED, f"{where}: unexpected HTTP {status}")


class HttpFetcher:
    """An aiohttp session that applies the credential scope at every redirect hop."""

    def __init__(self, creds: HttpCredentials, *, connections: int = 16, user_agent: str = "kthena-py") -> None:
        self._creds = creds
        self._user_agent = user_agent
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120),
                read_bufsize=READ_BUFSIZE,
                auto_decompress=False,
            )
        return self._session

    async def request(self, method: str, url: str, headers: Mapping[str, str] | None = None) -> aiohttp.ClientResponse:
        """Send ``method`` to ``url``, following redirects hop by hop; the caller releases the response.

        Raises:
            TransientError: A connection error.
        """
        session = self._get_session()
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            hop_headers = {"User-Agent": self._user_agent, "Accept-Encoding": "identity", **(headers or {})}
            hop_headers.update(auth_headers(current, self._creds))
            try:
                response = await session.request(method, current, headers=hop_headers, allow_redirects=False)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise TransientError(f"{sanitize_source(current)}: {type(exc).__name__}") from None
            if response.status in _REDIRECTS and "Location" in response.headers:
                location = response.headers["Location"]
                response.release()
                # GET and HEAD keep their method on every redirect status; the next hop's credentials are
                # recomputed for its own URL at the top of the loop.
                current = urljoin(current, location)
                continue
            return response
        raise DownloadError(Reason.DOWNLOAD_FAILED, f"{sanitize_source(url)}: more than {MAX_REDIRECTS} redirects")

    async def head(self, url: str) -> Head:
        """HEAD ``url`` (following redirects): size, ETag and whether ranges are served."""
        response = await self.request("HEAD", url)
        try:
            if response.status >= 400:
                raise _classify(response.status, url)
            length = response.headers.get("Content-Length")
            return Head(
                str(response.url),
                int(length) if length and length.isdigit() else None,
                response.headers.get("ETag"),
                response.headers.get("Accept-Ranges", "").lower() == "bytes",
            )
        finally:
            response.release()

    async def open(self, url: str, offset: int, etag: str | None = None) -> Stream:
        """GET ``url`` from ``offset`` (see the module docstring)."""
        headers: dict[str, str] = {}
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if etag and not etag.startswith("W/"):
                headers["If-Range"] = etag
        response = await self.request("GET", url, headers)
        if offset and response.status == 416:
            response.release()
            response = await self.request("GET", url)
        if response.status not in (200, 206):
            response.release()
            raise _classify(response.status, url)
        start = offset if response.status == 206 else 0
        return Stream(start, self._blocks(response, url))

    async def _blocks(self, response: aiohttp.ClientResponse, url: str) -> AsyncGenerator[bytes, None]:
        # Chunks are handed on as they arrive (no copy here); the transfer layer batches them.
        try:
            while True:
                try:
                    chunk = await response.content.readany()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise TransientError(f"{sanitize_source(url)}: {type(exc).__name__} while reading") from None
                if not chunk:
                    return
                yield chunk
        finally:
            response.release()

    async def close(self) -> None:
        """Close the session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
