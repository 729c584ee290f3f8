"""The fingerprint, the names and the one parser of the downloader's output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.api.modelcache import DownloadProgress
from kthena_py.plan.modelcache import (
    bounded_name,
    claim_name,
    cleanup_job_name,
    download_job_name,
    fingerprint,
    human_size,
    parse_progress,
    parse_result,
)

from .builders import NODE_LOCAL, SHA_A, SHA_B, TEMPLATE, cache

NAME = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,200}[a-z0-9])?", fullmatch=True)


def test_the_fingerprint_ignores_how_a_download_runs_but_not_what_it_stages() -> None:
    base = cache(files=["a", "b"])
    same = [
        cache(files=["b", "a"]),
        cache(files=["a", "b"], maxWorkers=2, prefetch=False, sourceSecretRef={"name": "s"}),
        cache(files=["a", "b"], placement={"nodeSelector": {"zone": "x"}}),
    ]
    different = [
        cache(files=["a"]),
        cache(files=["a", "b"], revision="v2"),
        cache(files=["a", "b"], source="hf://org/other"),
        cache(files=["a", "b"], fileSHA256={"a": SHA_A}),
        cache(files=["a", "b"], storage=TEMPLATE),
        cache(files=["a", "b"], storage=NODE_LOCAL),
    ]
    assert {fingerprint(c.spec) for c in same} == {fingerprint(base.spec)}
    assert len({fingerprint(c.spec) for c in different} | {fingerprint(base.spec)}) == len(different) + 1
    assert len(fingerprint(base.spec)) == 16


@given(
    NAME, st.text(alphabet="0123456789abcdef", min_size=16, max_size=16), st.one_of(st.none(), NAME), st.integers(0, 99)
)
def test_names_are_deterministic_bounded_and_distinct(cache_name: str, fp: str, node: str | None, attempt: int) -> None:
    name = download_job_name(cache_name, fp, node, attempt)
    assert name == download_job_name(cache_name, fp, node, attempt)
    assert len(name) <= 63 and len(cleanup_job_name(cache_name, fp, node)) <= 63
    assert name != download_job_name(cache_name, fp, node, attempt + 1)
    assert name != cleanup_job_name(cache_name, fp, node)
    assert not name.endswith("-") and len(claim_name(cache_name)) <= 253


def test_short_names_read_as_the_convention_and_long_ones_get_a_hash() -> None:
    assert download_job_name("llama", "0123456789abcdef") == "llama-01234567"
    assert download_job_name("llama", "0123456789abcdef", "node-1", 2) == "llama-01234567-node-1-2"
    assert cleanup_job_name("llama", "0123456789abcdef") == "llama-rm-01234567"
    assert claim_name("llama") == "llama-cache"
    long_a, long_b = bounded_name("x" * 70, "a"), bounded_name("x" * 70, "b")
    assert len(long_a) == 63 and long_a != long_b and long_a.startswith("x" * 54)


@pytest.mark.parametrize(
    ("text", "ok", "reason", "files", "size", "revision"),
    [
        (
            json.dumps(
                {"ok": True, "files": [{"name": "m", "size": 3, "sha256": SHA_A}], "sizeBytes": 3, "revision": "r1"}
            ),
            True,
            None,
            1,
            3,
            "r1",
        ),
        (
            '{"ok": false, "reason": "IntegrityCheckFailed", "message": "m: sha256 differs"}',
            False,
            "IntegrityCheckFailed",
            0,
            None,
            None,
        ),
        (
            'downloading...\nstill going\n{"ok": false, "reason": "SourceNotFound", "message": "404"}',
            False,
            "SourceNotFound",
            0,
            None,
            None,
        ),
        (
            '{"files": [{"path": "a", "bytes": 2, "sha256": "' + SHA_B.upper() + '"}, {"name": "bad"}]}',
            True,
            None,
            1,
            2,
            None,
        ),
        ('{"error": "boom"}', False, "DownloadFailed", 0, None, None),
        ('{"ok": true, "size_bytes": 7}', True, None, 0, 7, None),
    ],
)
def test_results_are_read_tolerantly(
    text: str, ok: bool, reason: str | None, files: int, size: int | None, revision: str | None
) -> None:
    parsed = parse_result(text)
    assert parsed is not None
    assert (parsed.ok, parsed.reason, len(parsed.files), parsed.size_bytes, parsed.revision) == (
        ok,
        reason,
        files,
        size,
        revision,
    )
    assert all(f.sha256 == f.sha256.lower() for f in parsed.files)


@pytest.mark.parametrize(
    "text", [None, "", "Traceback (most recent call last):\n  ...\nOSError: disk full", "[1, 2]", "{not json"]
)
def test_text_without_a_result_is_not_a_result(text: str | None) -> None:
    assert parse_result(text) is None


@given(st.text())
def test_any_text_parses_without_raising(text: str) -> None:
    parse_result(text)


def test_a_one_file_result_has_the_files_digest() -> None:
    parsed = parse_result(json.dumps({"ok": True, "files": [{"name": "m.gguf", "size": 1, "sha256": SHA_A}]}))
    assert parsed is not None and parsed.sha256 == SHA_A


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {
                "bytesDone": 50,
                "bytesTotal": 200,
                "filesDone": 1,
                "filesTotal": 3,
                "etaSeconds": 12,
                "rateBytesPerSecond": 9,
            },
            DownloadProgress(
                bytes_done=50, bytes_total=200, files_done=1, files_total=3, percent="25%", eta_seconds=12
            ),
        ),
        ({"bytesDone": 7}, DownloadProgress(bytes_done=7, files_done=0)),
        (
            {"bytesDone": 300, "bytesTotal": 200},
            DownloadProgress(bytes_done=300, bytes_total=200, files_done=0, percent="100%"),
        ),
        ({"phase": "listing"}, None),
        ([1], None),
        (None, None),
    ],
)
def test_progress_reports(body: object, expected: DownloadProgress | None) -> None:
    assert parse_progress(body) == expected


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (2 * 1024**3, "2.0 GiB"), (5 * 1024**5, "5.0 PiB")],
)
def test_human_sizes(size: int, text: str) -> None:
    assert human_size(size) == text
