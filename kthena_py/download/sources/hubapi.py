"""The Hugging Face hub's model-info answer, read without loading the hub client: what to ask and what it means.

Loading ``huggingface_hub``'s API module (and the HTTP client under it) costs about 0.2 s of every run, more
than the listing request itself. The common answer (200 with the model's files) is simple JSON, so the
hub source sends the same request the hub client would and reads the answer with these functions; every
other answer is left to ``huggingface_hub`` (see :mod:`.hf`).

Guarantees (pure: no I/O, no clock):

* :func:`info_url` is the URL ``HfApi.model_info(repo_id, revision=..., files_metadata=True)`` requests;
* :func:`resolve_url` equals ``huggingface_hub.hf_hub_url(repo_id, filename, revision=..., endpoint=...)`` for
  a model repository;
* :func:`listing_of` turns a 200 answer's JSON into the listing the hub client's ``ModelInfo`` gives: each
  file's size (the LFS size for LFS files), its LFS sha256 in lower case, the identity ``COMMIT:BLOB`` and the
  resolve URL at the resolved commit; it returns ``None`` for any answer whose shape it does not fully
  recognise, so the caller can hand that answer to the hub client instead of guessing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..plan import RemoteFile
from .base import Listing


def info_url(endpoint: str, repo_id: str, revision: str | None) -> str:
    """The model-info URL with file metadata (sizes, blob ids, LFS digests)."""
    path = f"{endpoint}/api/models/{repo_id}"
    if revision is not None:
        path += f"/revision/{quote(revision, safe='')}"
    return path + "?blobs=true"


def resolve_url(endpoint: str, repo_id: str, revision: str, filename: str) -> str:
    """The URL that serves ``filename`` of ``repo_id`` at ``revision``."""
    return f"{endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"


def _optional_int(value: Any) -> tuple[bool, int | None]:
    if value is None:
        return True, None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return True, value
    return False, None


def _optional_str(value: Any) -> tuple[bool, str | None]:
    if value is None or isinstance(value, str):
        return True, value
    return False, None


def _file_of(sibling: Any, repo_id: str, endpoint: str, commit: str) -> RemoteFile | None:
    if not isinstance(sibling, dict):
        return None
    name = sibling.get("rfilename")
    size_ok, size = _optional_int(sibling.get("size"))
    blob_ok, blob_id = _optional_str(sibling.get("blobId"))
    if not isinstance(name, str) or not name or not size_ok or not blob_ok:
        return None
    lfs = sibling.get("lfs")
    sha256: str | None = None
    lfs_sha256 = ""
    if lfs:  # an empty object means no LFS, as the hub client reads it
        if not isinstance(lfs, dict):
            return None
        lfs_size_ok, lfs_size = _optional_int(lfs.get("size"))
        sha_ok, lfs_digest = _optional_str(lfs.get("sha256"))
        if not lfs_size_ok or not sha_ok or lfs_size is None or lfs_digest is None:
            return None
        size = lfs_size
        sha256 = lfs_digest.lower() if lfs_digest else None
        lfs_sha256 = lfs_digest
    return RemoteFile(
        name=name,
        size=size,
        sha256=sha256,
        identity=f"{commit}:{blob_id or lfs_sha256}",
        locator=resolve_url(endpoint, repo_id, commit, name),
    )


def listing_of(data: Any, repo_id: str, endpoint: str, revision: str | None) -> Listing | None:
    """The listing in a model-info answer (``data`` is its decoded JSON), or ``None`` when it is not one."""
    if not isinstance(data, dict):
        return None
    sha_ok, sha = _optional_str(data.get("sha"))
    siblings = data.get("siblings")
    if not sha_ok or not isinstance(siblings, list):
        return None
    commit = sha or revision or "main"
    files = []
    for sibling in siblings:
        file = _file_of(sibling, repo_id, endpoint, commit)
        if file is None:
            return None
        files.append(file)
    return Listing(tuple(files), revision=sha)
