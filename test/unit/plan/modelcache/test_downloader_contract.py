"""The controller reads exactly what ``kthena-py download`` writes: its result and its progress documents.

The two sides live in different packages (the downloader never imports the planner and the planner never
imports the downloader); this test is where their contract is pinned, so a renamed key fails here.
"""

from __future__ import annotations

import pytest

from kthena_py.download.progress import Phase, Progress, Snapshot, snapshot
from kthena_py.download.result import FileEntry, Outcome, Reason, render_result
from kthena_py.plan.modelcache.result import parse_progress, parse_result

_A = "a" * 64
_B = "b" * 64


def _outcome(reason: Reason, files: tuple[FileEntry, ...] = (), message: str = "") -> Outcome:
    return Outcome(
        reason=reason, message=message, source="hf://org/m", path="/model-cache/x", revision="abc", files=files
    )


def test_a_success_is_read_as_ok_with_files_size_and_revision() -> None:
    files = (FileEntry("config.json", 10, _A), FileEntry("model.safetensors", 1000, _B))
    result = parse_result(render_result(_outcome(Reason.SUCCEEDED, files, "downloaded and verified")))
    assert result is not None
    assert result.ok and result.reason is None
    assert [f.name for f in result.files] == ["config.json", "model.safetensors"]
    assert result.size_bytes == 1010 and result.revision == "abc"


def test_a_one_file_model_reports_its_digest() -> None:
    result = parse_result(render_result(_outcome(Reason.SUCCEEDED, (FileEntry("m.gguf", 5, _A),))))
    assert result is not None and result.sha256 == _A


def test_each_failure_reason_is_carried_through() -> None:
    for reason in Reason:
        if reason is Reason.SUCCEEDED:
            continue
        result = parse_result(render_result(_outcome(reason, message=f"{reason.value} happened")))
        assert result is not None
        assert not result.ok and result.reason == reason.value and result.message == f"{reason.value} happened"


def test_a_result_after_log_lines_is_found() -> None:
    text = '{"event": "progress"}\nsome log line\n' + render_result(_outcome(Reason.INTEGRITY_CHECK_FAILED))
    result = parse_result(text)
    assert result is not None and result.reason == "IntegrityCheckFailed"


def test_a_truncated_file_list_still_gives_the_whole_size() -> None:
    files = tuple(FileEntry(f"shard-{i:05d}.safetensors", 100, _A) for i in range(200))
    text = render_result(_outcome(Reason.SUCCEEDED, files))
    result = parse_result(text)
    assert result is not None and result.ok
    assert 0 < len(result.files) < 200 and result.size_bytes == 200 * 100


def test_progress_is_read_with_a_percent() -> None:
    snap = Snapshot(
        Phase.DOWNLOADING, bytes_done=512, bytes_total=2048, files_done=1, files_total=3, rate=10.0, eta=153.6
    )
    progress = parse_progress(snap.to_json())
    assert progress is not None
    assert (progress.bytes_done, progress.bytes_total, progress.files_done, progress.files_total) == (512, 2048, 1, 3)
    assert progress.percent == "25%" and progress.eta_seconds == 153


@pytest.mark.parametrize("phase", [Phase.STARTING, Phase.LISTING])
def test_before_the_listing_the_totals_are_unknown_not_zero(phase: Phase) -> None:
    """A download pod scraped before it listed its files reports 0 of 0: that is unknown, not an empty model."""
    fresh = snapshot(Progress(phase=phase))
    progress = parse_progress(fresh.to_json())
    assert progress is not None
    assert (progress.bytes_done, progress.bytes_total, progress.files_done, progress.files_total) == (0, None, 0, None)
    assert progress.percent is None


def test_once_listed_an_empty_selection_is_zero_files() -> None:
    listed = Snapshot(Phase.DOWNLOADING, bytes_done=0, bytes_total=0, files_done=0, files_total=0, rate=None, eta=None)
    progress = parse_progress(listed.to_json())
    assert progress is not None and progress.files_total == 0
