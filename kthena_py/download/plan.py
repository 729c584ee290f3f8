"""What to fetch, resume, verify locally or skip: pure decisions over a listing and the local state.

Guarantees (no I/O, no clock):

* :func:`select_files` keeps the files ``--files`` names (exact names or glob patterns); an exact name or a
  pattern that matches nothing is ``SourceNotFound``, never silently skipped;
* :func:`expectations` collects, per file, every digest it must match: ``--sha256`` (one-file models only),
  ``--file-sha256`` and the digest the source gives (Hugging Face LFS); a user digest that contradicts the
  source's is ``IntegrityCheckFailed`` before a byte is fetched;
* :func:`plan_files` skips a file only when the journal says it verified for the same remote identity, the
  final file still has the recorded size and the recorded digest satisfies every expectation; it resumes a
  partial only when it was started for the same identity and is not longer than the file; anything else is
  fetched from zero; a final file of the right size whose digest the journal does not know is hashed
  locally (:class:`VerifyLocal`) when there is a digest to check it against;
* :func:`check_digest` is the one place that compares a computed digest with the expectations.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .result import DownloadError, Reason

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
RESERVED_PREFIX = ".kthena-"
PARTIAL_SUFFIX = ".partial"
LOCK_NAME = ".lock"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a source: its relative name, size (when known), source digest and remote identity."""

    name: str
    size: int | None
    sha256: str | None = None
    identity: str = ""
    locator: str = ""


@dataclass(frozen=True)
class Expectation:
    """A digest a file must have, and who said so (``--sha256``, ``--file-sha256``, ``lfs``)."""

    origin: str
    sha256: str


@dataclass(frozen=True)
class JournalEntry:
    """What an earlier run recorded about a file: verified (``complete``) or a partial it started."""

    name: str
    identity: str
    complete: bool
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class LocalFacts:
    """Sizes of what is on disk: the final file and the partial, when present."""

    final_size: int | None = None
    partial_size: int | None = None


@dataclass(frozen=True)
class Skip:
    """Already verified: nothing to do."""

    file: RemoteFile
    sha256: str
    size: int


@dataclass(frozen=True)
class VerifyLocal:
    """A final file of the right size is there with no journal entry: hash it locally, fetch if it differs."""

    file: RemoteFile


@dataclass(frozen=True)
class Fetch:
    """Stream the file into its partial from ``offset`` (``0``: discard any partial first)."""

    file: RemoteFile
    offset: int


Action = Skip | VerifyLocal | Fetch


def normalize_sha256(value: str, what: str) -> str:
    """A lower-case 64-hex digest.

    Raises:
        DownloadError: ``InvalidArguments`` when it is not one.
    """
    digest = value.strip().lower()
    if not _HEX64.match(digest):
        raise DownloadError(Reason.INVALID_ARGUMENTS, f"{what}: not a sha256 (64 hex digits): {value!r}")
    return digest


def parse_file_digests(items: Sequence[str]) -> dict[str, str]:
    """``--file-sha256 NAME=HEX`` values as a map.

    Raises:
        DownloadError: ``InvalidArguments`` for a malformed item or a name given twice with different digests.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, digest = item.rpartition("=")
        if not sep or not name:
            raise DownloadError(Reason.INVALID_ARGUMENTS, f"--file-sha256 wants NAME=HEX, got {item!r}")
        value = normalize_sha256(digest, f"--file-sha256 {name}")
        if out.get(name, value) != value:
            raise DownloadError(Reason.INVALID_ARGUMENTS, f"--file-sha256 {name} given twice with different digests")
        out[name] = value
    return out


def is_safe_name(name: str) -> bool:
    """A relative path inside the output directory that is none of our own bookkeeping files."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return False
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    base = parts[-1]
    return not (parts[0].startswith(RESERVED_PREFIX) or name == LOCK_NAME or base.endswith(PARTIAL_SUFFIX))


def _is_pattern(text: str) -> bool:
    return any(c in text for c in "*?[")


def select_files(files: Iterable[RemoteFile], patterns: Sequence[str]) -> tuple[RemoteFile, ...]:
    """The files to stage, in name order (all of them when ``patterns`` is empty).

    Raises:
        DownloadError: ``SourceNotFound`` when the source has no file, or a name/pattern matches none;
            ``DownloadFailed`` for a name that would escape the output directory.
    """
    listing = sorted(files, key=lambda f: f.name)
    unsafe = [f.name for f in listing if not is_safe_name(f.name)]
    if unsafe:
        raise DownloadError(Reason.DOWNLOAD_FAILED, f"source lists unsafe file names: {unsafe[:3]}")
    if not listing:
        raise DownloadError(Reason.SOURCE_NOT_FOUND, "the source has no files")
    if not patterns:
        return tuple(listing)
    chosen: list[RemoteFile] = []
    missing: list[str] = []
    for pattern in patterns:
        hits = [
            f for f in listing if (fnmatch.fnmatchcase(f.name, pattern) if _is_pattern(pattern) else f.name == pattern)
        ]
        if not hits:
            missing.append(pattern)
        chosen.extend(hits)
    if missing:
        raise DownloadError(Reason.SOURCE_NOT_FOUND, f"not in the source: {', '.join(missing)}")
    unique = {f.name: f for f in chosen}
    return tuple(unique[name] for name in sorted(unique))


def expectations(
    selected: Sequence[RemoteFile], sha256: str | None, file_sha256: Mapping[str, str]
) -> dict[str, tuple[Expectation, ...]]:
    """Every digest each selected file must have.

    Raises:
        DownloadError: ``InvalidArguments`` for ``--sha256`` on a model of several files; ``SourceNotFound``
            for a ``--file-sha256`` name that is not staged; ``IntegrityCheckFailed`` when a user digest
            contradicts the source's.
    """
    names = {f.name for f in selected}
    if sha256 is not None and len(selected) != 1:
        raise DownloadError(
            Reason.INVALID_ARGUMENTS,
            f"--sha256 is for a one-file model; this one has {len(selected)} files: use --file-sha256 NAME=HEX",
        )
    unknown = sorted(set(file_sha256) - names)
    if unknown:
        raise DownloadError(Reason.SOURCE_NOT_FOUND, f"--file-sha256 names files not staged: {', '.join(unknown)}")
    out: dict[str, tuple[Expectation, ...]] = {}
    for f in selected:
        wanted: list[Expectation] = []
        if sha256 is not None:
            wanted.append(Expectation("--sha256", sha256))
        if f.name in file_sha256:
            wanted.append(Expectation("--file-sha256", file_sha256[f.name]))
        if f.sha256:
            wanted.append(Expectation("lfs", f.sha256))
        if len({e.sha256 for e in wanted}) > 1:
            said = ", ".join(f"{e.origin}={e.sha256[:12]}..." for e in wanted)
            raise DownloadError(Reason.INTEGRITY_CHECK_FAILED, f"{f.name}: the expected digests disagree ({said})")
        out[f.name] = tuple(wanted)
    return out


def check_digest(name: str, actual: str, wanted: Sequence[Expectation]) -> str | None:
    """``None`` when ``actual`` satisfies every expectation, else the mismatch message."""
    for expectation in wanted:
        if expectation.sha256 != actual:
            return f"{name}: sha256 {actual} does not match {expectation.origin} {expectation.sha256}"
    return None


def plan_files(
    selected: Sequence[RemoteFile],
    wanted: Mapping[str, Sequence[Expectation]],
    journal: Mapping[str, JournalEntry],
    local: Mapping[str, LocalFacts],
) -> tuple[Action, ...]:
    """One action per selected file (see the module docstring for the rules)."""
    actions: list[Action] = []
    for f in selected:
        entry = journal.get(f.name)
        facts = local.get(f.name, LocalFacts())
        if (
            entry is not None
            and entry.complete
            and entry.identity == f.identity
            and entry.size is not None
            and entry.sha256 is not None
            and facts.final_size == entry.size
            and (f.size is None or f.size == entry.size)
            and check_digest(f.name, entry.sha256, wanted.get(f.name, ())) is None
        ):
            actions.append(Skip(f, entry.sha256, entry.size))
            continue
        if (
            facts.partial_size is not None
            and entry is not None
            and not entry.complete
            and entry.identity == f.identity
            and f.identity
            and (f.size is None or facts.partial_size <= f.size)
        ):
            actions.append(Fetch(f, facts.partial_size))
            continue
        known_digest = (
            entry is not None and entry.complete and entry.identity == f.identity and entry.size == facts.final_size
        )
        if (
            facts.partial_size is None
            and facts.final_size is not None
            and facts.final_size == f.size
            and wanted.get(f.name)
            and not known_digest  # the journal knows this file's digest already, and it did not match
        ):
            actions.append(VerifyLocal(f))
            continue
        actions.append(Fetch(f, 0))
    return tuple(actions)
