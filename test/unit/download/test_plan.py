"""The pure decisions: file selection, expected digests, and the per-file plan."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.plan import (
    Expectation,
    Fetch,
    JournalEntry,
    LocalFacts,
    RemoteFile,
    Skip,
    VerifyLocal,
    check_digest,
    expectations,
    is_safe_name,
    parse_file_digests,
    plan_files,
    select_files,
)
from kthena_py.download.result import DownloadError, Reason

A = hashlib.sha256(b"a").hexdigest()
B = hashlib.sha256(b"b").hexdigest()
FILES = (
    RemoteFile("config.json", 10, None, "c1"),
    RemoteFile("model-00001.safetensors", 100, A, "c1"),
    RemoteFile("model-00002.safetensors", 100, None, "c1"),
)


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ((), ["config.json", "model-00001.safetensors", "model-00002.safetensors"]),
        (("config.json",), ["config.json"]),
        (("*.safetensors",), ["model-00001.safetensors", "model-00002.safetensors"]),
        (("*.safetensors", "model-00001.safetensors"), ["model-00001.safetensors", "model-00002.safetensors"]),
    ],
)
def test_select_files(patterns: tuple[str, ...], expected: list[str]) -> None:
    assert [f.name for f in select_files(FILES, patterns)] == expected


@pytest.mark.parametrize(
    ("files", "patterns", "reason"),
    [
        (FILES, ("missing.bin",), Reason.SOURCE_NOT_FOUND),
        (FILES, ("*.gguf",), Reason.SOURCE_NOT_FOUND),
        ((), (), Reason.SOURCE_NOT_FOUND),
        ((RemoteFile("../etc/passwd", 1),), (), Reason.DOWNLOAD_FAILED),
        ((RemoteFile(".kthena-complete", 1),), (), Reason.DOWNLOAD_FAILED),
    ],
)
def test_select_files_errors(files: tuple[RemoteFile, ...], patterns: tuple[str, ...], reason: Reason) -> None:
    with pytest.raises(DownloadError) as info:
        select_files(files, patterns)
    assert info.value.reason is reason


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("a.bin", True),
        ("dir/a.bin", True),
        ("/abs", False),
        ("a/../b", False),
        ("./a", False),
        ("a//b", False),
        ("x.partial", False),
        (".lock", False),
        (".kthena-state.json", False),
        ("", False),
    ],
)
def test_is_safe_name(name: str, safe: bool) -> None:
    assert is_safe_name(name) is safe


def test_expectations_collects_user_and_hub_digests() -> None:
    got = expectations(FILES, None, {"config.json": B})
    assert got["config.json"] == (Expectation("--file-sha256", B),)
    assert got["model-00001.safetensors"] == (Expectation("lfs", A),)
    assert got["model-00002.safetensors"] == ()


@pytest.mark.parametrize(
    ("sha256", "per_file", "reason"),
    [
        (A, {}, Reason.INVALID_ARGUMENTS),  # --sha256 on a three-file model
        (None, {"nope": A}, Reason.SOURCE_NOT_FOUND),
        (None, {"model-00001.safetensors": B}, Reason.INTEGRITY_CHECK_FAILED),  # contradicts the hub
    ],
)
def test_expectations_errors(sha256: str | None, per_file: dict[str, str], reason: Reason) -> None:
    with pytest.raises(DownloadError) as info:
        expectations(FILES, sha256, per_file)
    assert info.value.reason is reason


def test_sha256_for_a_one_file_model() -> None:
    one = (RemoteFile("m.gguf", 5, None, "e"),)
    assert expectations(one, A, {}) == {"m.gguf": (Expectation("--sha256", A),)}


def test_parse_file_digests() -> None:
    assert parse_file_digests([f"a=b={A.upper()}"]) == {"a=b": A}
    for bad in ["noequals", f"={A}", "x=abc"]:
        with pytest.raises(DownloadError):
            parse_file_digests([bad])


F = RemoteFile("w.bin", 100, None, "etag:1")
DONE = JournalEntry("w.bin", "etag:1", True, 100, A)
STARTED = JournalEntry("w.bin", "etag:1", False)


@pytest.mark.parametrize(
    ("journal", "facts", "wanted", "expected"),
    [
        # Verified before, same identity, file still there: skip.
        ({"w.bin": DONE}, LocalFacts(100, None), (), Skip(F, A, 100)),
        # ... but the expected digest is now another one: fetch again.
        ({"w.bin": DONE}, LocalFacts(100, None), (Expectation("--sha256", B),), Fetch(F, 0)),
        # ... the remote changed (identity): fetch again.
        ({"w.bin": JournalEntry("w.bin", "etag:0", True, 100, A)}, LocalFacts(100, None), (), Fetch(F, 0)),
        # ... the final file was truncated: fetch again.
        ({"w.bin": DONE}, LocalFacts(50, None), (), Fetch(F, 0)),
        # A partial started for the same identity: resume from its size.
        ({"w.bin": STARTED}, LocalFacts(None, 40), (), Fetch(F, 40)),
        # ... started for another identity: from zero.
        ({"w.bin": JournalEntry("w.bin", "etag:0", False)}, LocalFacts(None, 40), (), Fetch(F, 0)),
        # ... longer than the file: from zero.
        ({"w.bin": STARTED}, LocalFacts(None, 140), (), Fetch(F, 0)),
        # A partial without a journal entry: from zero.
        ({}, LocalFacts(None, 40), (), Fetch(F, 0)),
        # A final file of the right size, no journal, a digest to check: verify locally.
        ({}, LocalFacts(100, None), (Expectation("--sha256", A),), VerifyLocal(F)),
        # ... no digest to check it against: fetch.
        ({}, LocalFacts(100, None), (), Fetch(F, 0)),
        # Nothing there.
        ({}, LocalFacts(), (), Fetch(F, 0)),
    ],
)
def test_plan_files(
    journal: dict[str, JournalEntry], facts: LocalFacts, wanted: tuple[Expectation, ...], expected: object
) -> None:
    assert plan_files([F], {"w.bin": wanted}, journal, {"w.bin": facts}) == (expected,)


names = st.text(alphabet="abc.-_", min_size=1, max_size=6)
remote = st.builds(
    RemoteFile,
    name=names,
    size=st.one_of(st.none(), st.integers(0, 1000)),
    sha256=st.none(),
    identity=st.sampled_from(["", "i1", "i2"]),
)
entry = st.builds(
    JournalEntry,
    name=st.just("x"),
    identity=st.sampled_from(["", "i1", "i2"]),
    complete=st.booleans(),
    size=st.one_of(st.none(), st.integers(0, 1000)),
    sha256=st.sampled_from([None, A, B]),
)
facts_st = st.builds(
    LocalFacts,
    final_size=st.one_of(st.none(), st.integers(0, 1000)),
    partial_size=st.one_of(st.none(), st.integers(0, 1000)),
)


@given(file=remote, journal_entry=st.one_of(st.none(), entry), facts=facts_st, digest=st.sampled_from([None, A, B]))
def test_plan_never_trusts_what_it_cannot_show(
    file: RemoteFile, journal_entry: JournalEntry | None, facts: LocalFacts, digest: str | None
) -> None:
    wanted = (Expectation("--sha256", digest),) if digest else ()
    journal = {file.name: dataclasses.replace(journal_entry, name=file.name)} if journal_entry else {}
    (action,) = plan_files([file], {file.name: wanted}, journal, {file.name: facts})
    recorded = journal.get(file.name)
    if isinstance(action, Skip):
        # Only a verified journal entry for this very remote version, whose file is there, skips.
        assert recorded is not None and recorded.complete and recorded.identity == file.identity
        assert facts.final_size == recorded.size == action.size
        assert check_digest(file.name, action.sha256, wanted) is None
    elif isinstance(action, Fetch) and action.offset:
        # A resume continues a partial started for the same remote version, never past the end.
        assert recorded is not None and not recorded.complete and recorded.identity == file.identity != ""
        assert action.offset == facts.partial_size
        assert file.size is None or action.offset <= file.size
    elif isinstance(action, VerifyLocal):
        assert wanted and facts.final_size == file.size and facts.partial_size is None
