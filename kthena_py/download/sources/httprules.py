"""The HTTP decisions of a download, as pure functions: what a status means, which range, where a redirect goes.

Guarantees (no I/O, no clock; the client in :mod:`.httpget` applies them):

* :func:`classify`: 404/410 are ``SourceNotFound``, 401/403 ``AccessDenied`` (neither is retried), 408/429/5xx
  a :class:`~.base.TransientError`, anything else ``DownloadFailed``; the URL in the message is sanitized
  (no user-info, no query string);
* :func:`range_headers`: nothing from offset 0; ``Range: bytes=N-`` past it, with ``If-Range`` only for a
  strong ETag (a weak one cannot guard a range);
* :func:`body_start`: a ``206`` answer starts where we asked, a ``200`` answer is the whole file from 0;
* :func:`redirect_target`: the absolute URL a redirect answer points to, ``None`` when the answer is no
  redirect; a redirect to anything but http(s) is refused. Credentials are not decided here: the client asks
  :func:`~kthena_py.download.credentials.auth_headers` again for every hop.
"""

from __future__ import annotations

from urllib.parse import urljoin

from ..credentials import origin, sanitize_source
from ..result import DownloadError, Reason
from .base import TransientError

MAX_REDIRECTS = 10
REDIRECTS = frozenset({301, 302, 303, 307, 308})


def classify(status: int, url: str) -> Exception:
    """The error an unwanted ``status`` from ``url`` becomes."""
    where = sanitize_source(url)
    if status in (404, 410):
        return DownloadError(Reason.SOURCE_NOT_FOUND, f"{where}: HTTP {status}")
    if status in (401, 403):
        return DownloadError(Reason.ACCESS_DENIED, f"{where}: HTTP {status} (missing or wrong credentials?)")
    if status in (408, 429) or status >= 500:
        return TransientError(f"{where}: HTTP {status}")
    return DownloadError(Reason.DOWNLOAD_FAILED, f"{where}: unexpected HTTP {status}")


def range_headers(offset: int, etag: str | None) -> dict[str, str]:
    """The headers of a GET that resumes at ``offset`` of the version ``etag`` names."""
    if offset <= 0:
        return {}
    headers = {"Range": f"bytes={offset}-"}
    if etag and not etag.startswith("W/"):
        headers["If-Range"] = etag
    return headers


def body_start(status: int, offset: int) -> int:
    """Where the body of a successful answer starts in the file."""
    return offset if status == 206 else 0


def redirect_target(current: str, status: int, location: str | None) -> str | None:
    """The next hop's URL, or ``None`` when ``status`` is no redirect (or carries no ``Location``).

    Raises:
        DownloadError: ``DownloadFailed`` for a redirect to a URL that is not http(s).
    """
    if status not in REDIRECTS or not location:
        return None
    target = urljoin(current, location)
    if origin(target) is None:
        raise DownloadError(
            Reason.DOWNLOAD_FAILED, f"{sanitize_source(current)}: redirect to a non-HTTP URL {sanitize_source(target)}"
        )
    return target
