"""One download run: lock, marker check, listing, plan, parallel transfers, marker.

Guarantees:

* the output directory's lock is held for the whole run; under it, a marker that satisfies the request (and
  whose files still have their sizes) ends the run at once, with no network request;
* otherwise the stale marker is removed before anything changes, the source is listed once, the pure planner
  decides per file, and at most ``max_workers`` files transfer at a time; the first failure cancels the others
  (their partials stay for the next run);
* the marker is written last, atomically, only when every file verified; it and the result name the source's
  identity (:func:`source_identity`), which a later run that finds the marker reports again;
* a successful outcome carries the staged model's metadata, read under the lock (:mod:`.metadata`: never fails
  the run);
* every failure becomes an :class:`~.result.Outcome` with its reason and a message with credentials
  redacted; the run never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from kthena_py.sourceid import SourceIdentity

from . import state
from .config import Settings
from .credentials import redact, sanitize_source
from .filesystems import DirectIO, direct_io_allowed, output_filesystem
from .marker import Marker, RequestKey, encode
from .metadata import attach_metadata
from .plan import (
    Expectation,
    Fetch,
    JournalEntry,
    RemoteFile,
    Skip,
    VerifyLocal,
    expectations,
    plan_files,
    select_files,
)
from .progress import Phase, Progress
from .reporting import ProgressServer, Reporter
from .result import DownloadError, FileEntry, Outcome, Reason
from .sources.base import Listing, Source, TransientError
from .sources.spec import Kind, SourceSpec, parse_source
from .transfer import fetch_file, verify_local

log = structlog.get_logger("kthena_py.download")


@dataclass(frozen=True)
class Request:
    """Everything one run needs."""

    source: str
    out: str
    settings: Settings
    max_workers: int = 8
    files: tuple[str, ...] = ()
    sha256: str | None = None
    file_sha256: dict[str, str] = field(default_factory=dict)
    progress_address: str | None = None
    direct_io: DirectIO = "auto"

    def requested_revision(self, spec: SourceSpec) -> str | None:
        """The revision asked for (only hubs have revisions)."""
        if spec.kind is Kind.HF:
            return self.settings.hf_revision
        if spec.kind is Kind.MODELSCOPE:
            return self.settings.ms_revision
        return None


class _Journal:
    """The state file, updated as files start and finish (one writer: this event loop)."""

    def __init__(self, out: str) -> None:
        self._out = out
        self.entries = state.read_journal(out)

    def __call__(self, update: JournalEntry | str) -> None:
        if isinstance(update, str):
            self.entries.pop(update, None)
        else:
            self.entries[update.name] = update
        state.write_journal(self._out, self.entries)


async def _transfer_all(
    source: Source,
    request: Request,
    selected: tuple[RemoteFile, ...],
    wanted: dict[str, tuple[Expectation, ...]],
    journal: _Journal,
    reporter: Reporter,
) -> list[FileEntry]:
    out = request.out
    actions = plan_files(selected, wanted, journal.entries, state.local_facts(out, [f.name for f in selected]))
    progress = reporter.progress
    entries: dict[str, FileEntry] = {}
    gate = asyncio.Semaphore(request.max_workers)
    # One thread per file in flight (the blocking sources read in it), apart from the loop's default pool.
    executor = ThreadPoolExecutor(max_workers=request.max_workers, thread_name_prefix="kthena-download")
    fstype = output_filesystem(out)
    direct_io = direct_io_allowed(request.direct_io, fstype)
    log.info("writing", filesystem=fstype or "unknown", direct_io=direct_io)

    async def one(action: Skip | VerifyLocal | Fetch) -> None:
        if isinstance(action, Skip):
            entries[action.file.name] = FileEntry(action.file.name, action.size, action.sha256)
            progress.add_bytes(action.size)
            reporter.file_done(action.file.name, action.size, action.sha256, skipped=True)
            return
        async with gate:
            file = action.file
            entry: FileEntry | None = None
            if isinstance(action, VerifyLocal):
                entry = await verify_local(file, out, wanted[file.name])
                if entry is not None:
                    journal(JournalEntry(file.name, file.identity, True, entry.size, entry.sha256))
                    progress.add_bytes(entry.size)
            if entry is None:
                offset = action.offset if isinstance(action, Fetch) else 0
                entry = await fetch_file(
                    source, file, offset, out, wanted[file.name], progress, journal, executor, direct_io
                )
            entries[file.name] = entry
            reporter.file_done(entry.name, entry.size, entry.sha256)

    try:
        async with asyncio.TaskGroup() as group:
            for action in actions:
                group.create_task(one(action))
    except BaseExceptionGroup as group_error:
        first = _first_error(group_error)
        raise first from None
    finally:
        executor.shutdown(wait=False)
    return [entries[f.name] for f in selected]


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    errors: list[BaseException] = list(group.exceptions)
    for error in errors:
        if isinstance(error, BaseExceptionGroup):
            return _first_error(error)
    download_errors = [e for e in errors if isinstance(e, DownloadError)]
    return download_errors[0] if download_errors else errors[0]


def source_identity(spec: SourceSpec, listing: Listing) -> SourceIdentity | None:
    """The identity of what was listed: the adapter's, or for a hub the resolved commit and the files' total size.

    The hub's total counts every file of the commit (not only a selection), as the manager's revalidation of
    the hub's revision answer does (:func:`kthena_py.sourceid.from_hub_revision`).
    """
    if listing.identity is not None or spec.kind is not Kind.HF or not listing.revision:
        return listing.identity
    sizes = [f.size for f in listing.files]
    total = sum(s for s in sizes if s is not None) if None not in sizes else None
    return SourceIdentity(listing.revision, total)


async def _download(request: Request, spec: SourceSpec, key: RequestKey, progress: Progress) -> Outcome:
    out = request.out
    marker = state.read_marker(out)
    if marker is not None and state.marker_files_present(out, marker) and key == marker.request:
        log.info("already complete: nothing to download", files=len(marker.files), size=marker.total_size)
        progress.phase = Phase.COMPLETE
        progress.files_total = progress.files_done = len(marker.files)
        progress.bytes_total = progress.bytes_done = marker.total_size
        return Outcome(
            Reason.SUCCEEDED,
            "already complete",
            key.source,
            out,
            marker.resolved_revision,
            marker.files,
            cached=True,
            identity=marker.identity,
        )
    state.remove_marker(out)
    from .sources.factory import open_source

    source = open_source(spec, request.settings, out, max(2, request.max_workers * 2))
    reporter = Reporter(progress)
    try:
        progress.phase = Phase.LISTING
        listing = await source.list()
        selected = select_files(listing.files, request.files)
        wanted = expectations(selected, request.sha256, request.file_sha256)
        progress.files_total = len(selected)
        sizes = [f.size for f in selected]
        progress.bytes_total = sum(s for s in sizes if s is not None) if None not in sizes else None
        log.info(
            "downloading",
            files=len(selected),
            bytesTotal=progress.bytes_total,
            revision=listing.revision,
            verifiedBy=sorted({e.origin for w in wanted.values() for e in w}),
        )
        progress.phase = Phase.DOWNLOADING
        reporter.start()
        journal = _Journal(out)
        files = await _transfer_all(source, request, selected, wanted, journal, reporter)
    finally:
        await reporter.stop()
        await source.close()
    progress.phase = Phase.VERIFYING
    identity = source_identity(spec, listing)
    marker = Marker(key, listing.revision, tuple(files), datetime.now(UTC).isoformat(timespec="seconds"), identity)
    await asyncio.to_thread(state.write_atomic, os.path.join(out, ".kthena-complete"), encode(marker))
    if spec.kind is Kind.MODELSCOPE:
        shutil.rmtree(os.path.join(out, ".kthena-ms-staging"), ignore_errors=True)
    progress.phase = Phase.COMPLETE
    log.info("download complete", files=len(files), size=marker.total_size, revision=listing.revision)
    return Outcome(
        Reason.SUCCEEDED,
        "downloaded and verified",
        key.source,
        out,
        listing.revision,
        tuple(files),
        identity=identity,
    )


async def execute(request: Request, progress: Progress | None = None) -> Outcome:
    """Run one download (never raises: failures become the outcome)."""
    progress = progress or Progress()
    source_name = sanitize_source(request.source)
    server: ProgressServer | None = None
    try:
        spec = parse_source(request.source)
        key = RequestKey.of(
            source_name, request.requested_revision(spec), request.files, request.sha256, request.file_sha256
        )
        try:
            os.makedirs(request.out, exist_ok=True)
        except OSError as exc:
            raise DownloadError(Reason.STORAGE_UNAVAILABLE, f"cannot create {request.out}: {exc.strerror}") from None
        if request.progress_address:
            server = ProgressServer(progress)
            await server.start(request.progress_address)
            log.info("serving progress", address=f"{server.bound[0]}:{server.bound[1]}" if server.bound else None)
        lock = state.DirLock(request.out)
        await asyncio.to_thread(lock.acquire)
        try:
            outcome = await _download(request, spec, key, progress)
            return await attach_metadata(outcome, request.files)  # what the staged model says (never fails it)
        finally:
            lock.release()
    except DownloadError as exc:
        progress.phase = Phase.FAILED
        return Outcome(exc.reason, redact(exc.message, request.settings.secret_values()), source_name, request.out)
    except TransientError as exc:  # a listing that failed to connect: not retried (the Job's backoff is)
        progress.phase = Phase.FAILED
        return Outcome(
            Reason.DOWNLOAD_FAILED, redact(str(exc), request.settings.secret_values()), source_name, request.out
        )
    except OSError as exc:
        progress.phase = Phase.FAILED
        message = redact(f"{type(exc).__name__}: {exc}", request.settings.secret_values())
        return Outcome(Reason.STORAGE_UNAVAILABLE, message, source_name, request.out)
    except Exception as exc:  # a bug or an unforeseen client error: still a result, never a traceback alone
        progress.phase = Phase.FAILED
        log.exception("unexpected error")
        message = redact(f"{type(exc).__name__}: {exc}", request.settings.secret_values())
        return Outcome(Reason.DOWNLOAD_FAILED, message, source_name, request.out)
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                await server.stop()
