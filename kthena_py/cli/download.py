"""``kthena-py download``: turn the flags into a download request, run it, report the result.

Guarantees:

* any failure (bad flags included, once parsed) gives a JSON result with its reason and the reason's exit
  status; with ``--result-file`` the result is written there on success and on failure, at most 4096 bytes;
  the result is also the last line on stdout;
* log lines go to stderr (JSON off a terminal) through a stream that redacts every credential value it knows,
  including those of third-party loggers;
* ``--remove`` removes the output directory under the rules of :mod:`kthena_py.download.removal`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import Iterable
from typing import TextIO

from kthena_py.download.config import parse_config, resolve_settings
from kthena_py.download.credentials import redact, sanitize_source
from kthena_py.download.plan import normalize_sha256, parse_file_digests
from kthena_py.download.result import DownloadError, Outcome, Reason, render_result
from kthena_py.download.run import Request, execute
from kthena_py.runtime import logconfig


class RedactingStream:
    """A text stream that replaces credential values before writing."""

    def __init__(self, inner: TextIO, secrets: Iterable[str]) -> None:
        self._inner = inner
        self._secrets = list(secrets)

    def write(self, text: str) -> int:
        """Write ``text`` with secrets replaced."""
        return self._inner.write(redact(text, self._secrets))

    def flush(self) -> None:
        """Flush the inner stream."""
        self._inner.flush()

    def isatty(self) -> bool:
        """Whether the inner stream is a terminal."""
        return self._inner.isatty()


def _configure_logging(fmt: str, secrets: list[str]) -> None:
    json_lines = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    logconfig.configure("info", json=json_lines)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(RedactingStream(sys.stderr, secrets))
    for noisy in ("botocore", "boto3", "urllib3", "httpx", "httpx2", "huggingface_hub", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _build_request(args: argparse.Namespace, out: str) -> Request:
    if not args.source:
        raise DownloadError(Reason.INVALID_ARGUMENTS, "-s/--source is required")
    settings = resolve_settings(parse_config(args.config), os.environ, args.revision)
    sha256 = normalize_sha256(args.sha256, "--sha256") if args.sha256 else None
    file_sha256 = parse_file_digests(args.file_sha256)
    if sha256 and file_sha256:
        raise DownloadError(Reason.INVALID_ARGUMENTS, "--sha256 and --file-sha256 exclude each other")
    return Request(
        source=args.source,
        out=out,
        settings=settings,
        max_workers=args.max_workers,
        files=tuple(args.files),
        sha256=sha256,
        file_sha256=file_sha256,
        progress_address=args.progress_address,
        direct_io=args.direct_io,
    )


def _write_result(path: str | None, text: str) -> None:
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        print(f"kthena-py: cannot write the result to {path}: {exc.strerror}", file=sys.stderr)


def _remove(out: str, force: bool) -> Outcome:
    from kthena_py.download import removal

    try:
        message = removal.remove_download_dir(out, force=force)
    except DownloadError as exc:
        return Outcome(exc.reason, exc.message, "", out)
    return Outcome(Reason.SUCCEEDED, message, "", out)


def run(args: argparse.Namespace) -> int:
    """Run ``kthena-py download``; returns the exit status."""
    out = os.path.abspath(os.path.expanduser(args.output_dir))
    secrets: list[str] = []
    with contextlib.suppress(DownloadError):  # a bad --config is reported by _build_request below
        secrets = resolve_settings(parse_config(args.config), os.environ).secret_values()
    _configure_logging(args.log_format, secrets)
    log = logging.getLogger("kthena_py.download")
    if args.remove:
        outcome = _remove(out, args.force)
    else:
        try:
            request = _build_request(args, out)
        except DownloadError as exc:
            outcome = Outcome(exc.reason, redact(exc.message, secrets), sanitize_source(args.source or ""), out)
        else:
            if request.settings.unknown_keys:
                log.warning("ignoring unknown --config keys: %s", ", ".join(request.settings.unknown_keys))
            outcome = asyncio.run(execute(request))
    text = render_result(outcome)
    _write_result(args.result_file, text)
    if not outcome.succeeded:
        log.error("download failed: %s: %s", outcome.reason.value, outcome.message)
    print(text)
    # The process ends next: keep the interpreter's final garbage collections off the tens of thousands of
    # objects the source clients' imports created (about 0.2 s of every run, the cached one included).
    gc.freeze()
    return outcome.exit_code
