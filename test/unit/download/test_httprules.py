"""The pure HTTP decisions of the downloader (``kthena_py.download.sources.httprules``): table-driven and
with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.result import DownloadError, Reason
from kthena_py.download.sources.base import TransientError
from kthena_py.download.sources.httprules import body_start, classify, range_headers, redirect_target


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (404, Reason.SOURCE_NOT_FOUND),
        (410, Reason.SOURCE_NOT_FOUND),
        (401, Reason.ACCESS_DENIED),
        (403, Reason.ACCESS_DENIED),
        (400, Reason.DOWNLOAD_FAILED),
        (405, Reason.DOWNLOAD_FAILED),
        (304, Reason.DOWNLOAD_FAILED),
        (408, None),
        (429, None),
        (500, None),
        (503, None),
    ],
)
def test_classify(status: int, reason: Reason | None) -> None:
    error = classify(status, "https://user:pw@files.example/m.bin?sig=s3cr3t")
    if reason is None:
        assert isinstance(error, TransientError)
    else:
        assert isinstance(error, DownloadError) and error.reason is reason
    assert f"HTTP {status}" in str(error)
    assert "pw" not in str(error) and "s3cr3t" not in str(error)


@given(st.integers(min_value=500, max_value=599))
def test_every_5xx_is_transient(status: int) -> None:
    assert isinstance(classify(status, "http://127.0.0.1/x"), TransientError)


@pytest.mark.parametrize(
    ("offset", "etag", "expected"),
    [
        (0, '"abc"', {}),
        (0, None, {}),
        (10, None, {"Range": "bytes=10-"}),
        (10, '"abc"', {"Range": "bytes=10-", "If-Range": '"abc"'}),
        (10, 'W/"abc"', {"Range": "bytes=10-"}),  # a weak ETag cannot guard a range
        (10, "", {"Range": "bytes=10-"}),
    ],
)
def test_range_headers(offset: int, etag: str | None, expected: dict[str, str]) -> None:
    assert range_headers(offset, etag) == expected


@given(st.integers(min_value=1, max_value=2**50), st.text(min_size=1, max_size=20))
def test_a_resume_always_asks_for_the_rest(offset: int, etag: str) -> None:
    headers = range_headers(offset, etag)
    assert headers["Range"] == f"bytes={offset}-"
    assert ("If-Range" in headers) is (not etag.startswith("W/"))


@given(st.integers(min_value=0, max_value=2**50))
def test_body_start(offset: int) -> None:
    assert body_start(206, offset) == offset
    assert body_start(200, offset) == 0


@pytest.mark.parametrize(
    ("current", "status", "location", "expected"),
    [
        ("http://hub.example/a/b", 302, "https://cdn.example/x", "https://cdn.example/x"),
        ("http://hub.example/a/b", 307, "/c/d", "http://hub.example/c/d"),
        ("http://hub.example/a/b", 301, "c", "http://hub.example/a/c"),
        ("http://hub.example/a/b", 308, "//cdn.example/y", "http://cdn.example/y"),
        ("http://hub.example/a/b", 303, "http://127.0.0.1:9/z?sig=1", "http://127.0.0.1:9/z?sig=1"),
        ("http://hub.example/a/b", 302, None, None),
        ("http://hub.example/a/b", 302, "", None),
        ("http://hub.example/a/b", 200, "https://cdn.example/x", None),
        ("http://hub.example/a/b", 304, "https://cdn.example/x", None),
    ],
)
def test_redirect_target(current: str, status: int, location: str | None, expected: str | None) -> None:
    assert redirect_target(current, status, location) == expected


@pytest.mark.parametrize("location", ["ftp://files.example/x", "file:///etc/passwd", "javascript:alert(1)"])
def test_a_redirect_away_from_http_is_refused(location: str) -> None:
    with pytest.raises(DownloadError) as caught:
        redirect_target("https://hub.example/x", 302, location)
    assert caught.value.reason is Reason.DOWNLOAD_FAILED
