"""What a download pod reports: its result (the termination message) and its progress (the progress endpoint).

This is the one module that reads the downloader's output, tolerantly (pure):

* :func:`parse_result` takes a container's termination message. With ``terminationMessagePolicy:
  FallbackToLogsOnError`` that is either the downloader's result JSON or, when the process died before writing
  it, the tail of its log; the result is the **last line that is a JSON object** (so a JSON object after log
  lines is found), else the whole text when it is one JSON object. Keys are those of ``kthena-py download``'s
  result (:mod:`kthena_py.download.result`): ``phase`` (``Succeeded``/``Failed``), ``reason`` (``Succeeded``,
  ``IntegrityCheckFailed``, ``DownloadFailed``, ``UnsupportedSource``, ``SourceNotFound``, ...), ``message``,
  ``files`` (``[{name, size, sha256}]``), ``size``, ``revision``, ``identity`` (the staged source's
  ``{etag, contentLength, lastModified}``, :mod:`kthena_py.sourceid`); tolerated too: ``ok`` (bool, wins over
  ``phase``), ``sizeBytes``, ``sha256``, ``error``, snake_case spellings, ``path`` for a file's ``name`` and
  ``bytes`` for its ``size``. Without ``ok`` or ``phase``, success means no failure reason and no ``error``. A
  missing size is the sum of the files' sizes; malformed entries are skipped, never raised. Text that holds no
  JSON object gives ``None`` (the caller shows the text).
* the result's ``gguf`` and ``modelConfig`` objects (the staged model's metadata) are read by :mod:`.metadata`
  into :attr:`DownloadResult.gguf` / :attr:`DownloadResult.model_config` (a bad field is left out).
* :func:`parse_progress` takes the decoded body of ``GET /progress`` (``bytesDone``, ``bytesTotal``,
  ``filesDone``, ``filesTotal``, ``etaSeconds``, ...) and returns a :class:`DownloadProgress` with ``percent``
  computed (floor, ``"42%"``), or ``None`` when it is not such an object.
* :func:`human_size` renders bytes the way the status shows them (``"2.0 GiB"``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelcache import DownloadProgress, GGUFMetadata, ModelCacheFile, ModelConfigMetadata
from kthena_py.sourceid import SourceIdentity
from kthena_py.vocab.conditions import REASON_DOWNLOAD_FAILED

from .metadata import gguf_of, model_config_of

__all__ = ["DownloadResult", "human_size", "parse_progress", "parse_result"]

_SUCCEEDED = "Succeeded"
_SHA256 = re.compile(r"^[a-f0-9]{64}$")
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


@dataclass(frozen=True)
class DownloadResult:
    """A download pod's result.

    Attributes:
        ok: The download succeeded (files staged and verified).
        reason: Why it failed (the downloader's word, e.g. ``IntegrityCheckFailed``), ``None`` on success.
        message: The downloader's message (may be empty).
        files: The staged files.
        size_bytes: Their total size, when known.
        revision: The revision the source resolved to, when reported.
        sha256: The digest of a one-file model, when reported.
        gguf: What the staged GGUF's header says, when reported.
        model_config: What the staged ``config.json`` says, when reported.
        identity: The identity of the staged source content (``identity``: ETag, length, last modification).
    """

    ok: bool
    reason: str | None = None
    message: str = ""
    files: tuple[ModelCacheFile, ...] = ()
    size_bytes: int | None = None
    revision: str | None = None
    sha256: str | None = None
    gguf: GGUFMetadata | None = None
    model_config: ModelConfigMetadata | None = None
    identity: SourceIdentity | None = None


def _get(data: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in data:
            return data[key]
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _file(entry: Any) -> ModelCacheFile | None:
    if not isinstance(entry, dict):
        return None
    name = _text(_get(entry, "name", "path"))
    size = _int(_get(entry, "size", "bytes", "sizeBytes", "size_bytes"))
    digest = _text(_get(entry, "sha256", "digest"))
    if name is None or size is None or digest is None or not _SHA256.match(digest.lower()):
        return None
    return ModelCacheFile(name=name, size=size, sha256=digest.lower())


def _json_object(text: str) -> dict[str, Any] | None:
    for candidate in [*reversed(text.strip().splitlines()), text]:
        candidate = candidate.strip()
        if not candidate.startswith("{"):
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_result(text: str | None) -> DownloadResult | None:
    """Parse a download pod's termination message (see the module docstring); ``None`` if it holds no result."""
    if not text:
        return None
    data = _json_object(text)
    if data is None:
        return None
    reason = _text(data.get("reason"))
    error = _text(data.get("error"))
    ok_value, phase = data.get("ok"), _text(data.get("phase"))
    if isinstance(ok_value, bool):
        ok = ok_value
    elif phase in (_SUCCEEDED, "Failed"):
        ok = phase == _SUCCEEDED
    else:
        ok = reason in (None, _SUCCEEDED) and error is None
    if reason == _SUCCEEDED:
        reason = None
    entries = data.get("files")
    files = tuple(f for f in (_file(e) for e in (entries if isinstance(entries, list) else [])) if f is not None)
    size = _int(_get(data, "sizeBytes", "size_bytes", "size"))
    if size is None and files:
        size = sum(f.size for f in files)
    digest = _text(data.get("sha256"))
    if digest is not None and not _SHA256.match(digest.lower()):
        digest = None
    if digest is None and len(files) == 1:
        digest = files[0].sha256
    return DownloadResult(
        ok=ok,
        reason=None if ok else (reason or REASON_DOWNLOAD_FAILED),
        message=_text(data.get("message")) or error or "",
        files=tuple(sorted(files, key=lambda f: f.name)),
        size_bytes=size,
        revision=_text(data.get("revision")),
        sha256=digest.lower() if digest else None,
        gguf=gguf_of(data.get("gguf")),
        model_config=model_config_of(_get(data, "modelConfig", "model_config")),
        identity=SourceIdentity.from_json(data.get("identity")),
    )


_BEFORE_LISTING = ("Starting", "Listing")
"""Phases of a download report (the downloader's ``Phase``) in which its totals are not known yet."""


def parse_progress(data: Any) -> DownloadProgress | None:
    """Read a progress report (the decoded JSON of ``GET /progress``); ``None`` when it is not one."""
    if not isinstance(data, dict):
        return None
    done = _int(_get(data, "bytesDone", "bytes_done"))
    if done is None:
        return None
    total = _int(_get(data, "bytesTotal", "bytes_total"))
    files_done = _int(_get(data, "filesDone", "files_done")) or 0
    files_total = _int(_get(data, "filesTotal", "files_total"))
    if data.get("phase") in _BEFORE_LISTING:
        total = files_total = None  # reported as 0 until the files are listed: unknown, not an empty model
    eta = _int(_get(data, "etaSeconds", "eta_seconds"))
    percent = None
    if total:
        percent = f"{min(100, done * 100 // total)}%"
    return DownloadProgress(
        bytes_done=done,
        bytes_total=total,
        files_done=files_done,
        files_total=files_total,
        percent=percent,
        eta_seconds=eta,
    )


def human_size(size: int) -> str:
    """``size`` bytes in binary units with one decimal (``"512 B"``, ``"2.0 GiB"``)."""
    value = float(size)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
