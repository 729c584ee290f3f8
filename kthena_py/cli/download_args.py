"""The ``kthena-py download`` command line, parsed without loading the downloader.

Guarantees: Kthena's downloader flags keep their names, short forms and defaults (``-s/--source``,
``-o/--output-dir`` = ``~/downloads``, ``-w/--max-workers`` = 8, ``-c/--config`` JSON); building the parser
imports only the standard library; the downloader (and its clients) load when the command runs.
"""

from __future__ import annotations

import argparse

from .common import positive_int

__all__ = ["add_parser"]

_DESCRIPTION = """\
Download a model into a directory, verified and resumable; command-line compatible with Kthena's downloader.

Sources: hf://ORG/REPO or ORG/REPO (Hugging Face, HF_ENDPOINT honoured), s3://BUCKET/PREFIX and obs://
(S3-compatible, ENDPOINT), http(s)://URL (one file), pvc://CLAIM/PATH and absolute paths (copies), ms://ORG/REPO
(only with the modelscope package installed).

Every file is hashed (sha256) while it streams into NAME.partial and renamed only when it matches the expected
digests (--sha256, --file-sha256, the hub's LFS sha256). <out>/.kthena-complete is written last: a later run
with the same request downloads nothing. A killed run resumes. Settings: -c JSON keys hf_token, hf_endpoint,
hf_revision, ms_token, ms_revision, access_key, secret_key, endpoint; the environment fills the gaps
(HF_AUTH_TOKEN/HF_TOKEN, HF_ENDPOINT, HF_REVISION, MS_TOKEN, MS_REVISION, ACCESS_KEY/AWS_ACCESS_KEY_ID,
SECRET_KEY/AWS_SECRET_ACCESS_KEY, ENDPOINT/AWS_ENDPOINT_URL).

Exit status: 0 done; 1 DownloadFailed; 2 InvalidArguments; 3 IntegrityCheckFailed; 4 UnsupportedSource;
5 SourceNotFound; 6 AccessDenied; 7 StorageUnavailable; 8 RemoveRefused."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``download``."""
    p = sub.add_parser(
        "download",
        help="download a model, verified and resumable (Kthena's downloader CLI)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-s", "--source", help="what to download (required unless --remove)")
    p.add_argument("-o", "--output-dir", default="~/downloads", help="where to put it (default: ~/downloads)")
    p.add_argument("-w", "--max-workers", type=positive_int, default=8, help="files in parallel (default: 8)")
    p.add_argument("-c", "--config", help="JSON object of settings (wins over the environment)")
    p.add_argument(
        "--files", action="append", default=[], metavar="NAME", help="stage only this file or glob; repeatable"
    )
    p.add_argument("--sha256", metavar="HEX", help="expected digest of a one-file model")
    p.add_argument(
        "--file-sha256", action="append", default=[], metavar="NAME=HEX", help="expected digest of a file; repeatable"
    )
    p.add_argument("--revision", help="revision (branch, tag or commit) of a hub repository")
    p.add_argument("--result-file", metavar="PATH", help="write the JSON result here (e.g. /dev/termination-log)")
    p.add_argument("--progress-address", metavar="HOST:PORT", help="serve GET /progress (JSON) while running")
    p.add_argument(
        "--direct-io",
        choices=("auto", "on", "off"),
        default="auto",
        help="write files of 64 MiB+ bypassing the page cache: auto (local disks: ext4, xfs, btrfs, f2fs), on, off",
    )
    p.add_argument("--remove", action="store_true", help="remove the output directory (the cache cleanup) instead")
    p.add_argument("--force", action="store_true", help="with --remove: also a directory without our marker")
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto", help="auto: json off a TTY")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``download`` (see :func:`kthena_py.cli.download.run`)."""
    import gc

    # The downloader's imports create tens of thousands of long-lived objects: collecting while they are made
    # costs about 40 ms, and none of them is garbage. Collect nothing during the imports, then leave them out
    # of every later collection.
    gc.disable()
    try:
        from . import download
    finally:
        gc.enable()
    gc.freeze()
    return download.run(args)
