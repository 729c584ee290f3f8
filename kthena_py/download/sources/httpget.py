"""Blocking HTTP GETs and HEADs with ranges and per-hop credentials (``http.client``), for the http and hf sources.

Each file is fetched by one worker thread over its own connection: the body is read straight into the
caller's preallocated buffer (no chunk objects, no event-loop hop per chunk), and every blocking call releases
the GIL, so files in parallel really run in parallel.

Guarantees:

* redirects are followed here, one hop at a time (at most :data:`~.httprules.MAX_REDIRECTS`), each hop on a
  new connection, and the authentication headers of every hop come from
  :func:`~kthena_py.download.credentials.auth_headers` for *that* hop's URL: a token meant for the hub is not
  sent to the host the hub redirects to;
* a ranged read asks ``Range: bytes=N-`` (with ``If-Range`` for a strong ETag); a ``416`` answer is asked
  again without a range; a ``200`` answer means the whole file, and the :class:`HttpBody` says it starts at 0;
* content is never decoded (``Accept-Encoding: identity``); no proxy and no machine-wide credential is used;
* connecting may take :data:`CONNECT_TIMEOUT` seconds and each read :data:`READ_TIMEOUT`; a connection error,
  a timeout, a broken answer or a body shorter than its ``Content-Length`` is a :class:`~.base.TransientError`;
  other statuses are classified by :func:`~.httprules.classify`;
* :meth:`HttpBody.abort` (from another thread) shuts the socket down, so a blocked read returns at once.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit

from ..credentials import HttpCredentials, auth_headers, sanitize_source
from ..result import DownloadError, Reason
from .base import TransientError
from .httprules import MAX_REDIRECTS, body_start, classify, range_headers, redirect_target

CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 120.0
# What a broken connection or answer raises in http.client.
BROKEN = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Head:
    """What a HEAD says about a file (``url`` is the last hop's)."""

    url: str
    size: int | None
    etag: str | None
    accept_ranges: bool
    last_modified: str | None = None


class HttpBody:
    """The body of one GET answer (see :class:`~.base.Body`)."""

    def __init__(
        self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse, offset: int, where: str
    ) -> None:
        self.offset = offset
        self._connection = connection
        self._response = response
        self._where = where

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` from the socket; 0 at the end of the body.

        Raises:
            TransientError: The connection broke, or closed before ``Content-Length`` bytes came.
        """
        try:
            count = self._response.readinto(buffer)
        except BROKEN as exc:
            raise TransientError(f"{self._where}: {type(exc).__name__} while reading") from None
        if not count and buffer and self._response.length:
            raise TransientError(f"{self._where}: connection closed {self._response.length} bytes short")
        return count

    def abort(self) -> None:
        """Shut the socket down (a read blocked in another thread returns)."""
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the connection."""
        with contextlib.suppress(*BROKEN):
            self._response.close()
        self._connection.close()


class HttpGetter:
    """Blocking requests that apply the credential scope at every redirect hop (thread-safe: no shared state)."""

    def __init__(self, creds: HttpCredentials, *, user_agent: str = "kthena-py") -> None:
        self._creds = creds
        self._user_agent = user_agent

    @cached_property
    def _tls(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        connection: http.client.HTTPConnection
        if parts.scheme.lower() == "https":
            connection = http.client.HTTPSConnection(host, parts.port, timeout=CONNECT_TIMEOUT, context=self._tls)
        else:
            connection = http.client.HTTPConnection(host, parts.port, timeout=CONNECT_TIMEOUT)
        try:
            connection.connect()
        except BROKEN as exc:
            connection.close()
            raise TransientError(f"{sanitize_source(url)}: {type(exc).__name__}") from None
        if connection.sock is not None:
            connection.sock.settimeout(READ_TIMEOUT)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return connection, target

    def request(
        self, method: str, url: str, headers: Mapping[str, str] | None = None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, str]:
        """Send ``method`` to ``url``, following redirects hop by hop; the caller closes the connection.

        Returns:
            The connection, the final answer and the URL that gave it.

        Raises:
            TransientError: A connection error or timeout.
            DownloadError: Too many redirects, or a redirect to a non-HTTP URL.
        """
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            hop_headers = {"User-Agent": self._user_agent, "Accept-Encoding": "identity", **(headers or {})}
            hop_headers.update(auth_headers(current, self._creds))
            connection, target = self._connect(current)
            try:
                connection.request(method, target, headers=hop_headers)
                response = connection.getresponse()
            except BROKEN as exc:
                connection.close()
                raise TransientError(f"{sanitize_source(current)}: {type(exc).__name__}") from None
            try:
                following = redirect_target(current, response.status, response.getheader("Location"))
            except DownloadError:
                connection.close()
                raise
            if following is None:
                return connection, response, current
            # GET and HEAD keep their method on every redirect status; the next hop's credentials are
            # computed for its own URL at the top of the loop.
            connection.close()
            current = following
        raise DownloadError(Reason.DOWNLOAD_FAILED, f"{sanitize_source(url)}: more than {MAX_REDIRECTS} redirects")

    def head(self, url: str) -> Head:
        """HEAD ``url`` (following redirects): size, ETag and whether ranges are served."""
        connection, response, final = self.request("HEAD", url)
        try:
            if response.status >= 400:
                raise classify(response.status, url)
            length = response.getheader("Content-Length")
            return Head(
                final,
                int(length) if length and length.isdigit() else None,
                response.getheader("ETag"),
                (response.getheader("Accept-Ranges") or "").lower() == "bytes",
                response.getheader("Last-Modified"),
            )
        finally:
            connection.close()

    def open(self, url: str, offset: int, etag: str | None = None) -> HttpBody:
        """GET ``url`` from ``offset`` (see the module docstring)."""
        connection, response, _ = self.request("GET", url, range_headers(offset, etag))
        if offset and response.status == 416:
            connection.close()
            connection, response, _ = self.request("GET", url)
        if response.status not in (200, 206):
            connection.close()
            raise classify(response.status, url)
        return HttpBody(connection, response, body_start(response.status, offset), sanitize_source(url))
