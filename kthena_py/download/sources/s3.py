"""``s3://BUCKET/PREFIX`` and ``obs://`` (S3-compatible): objects under a prefix, through ``boto3``.

Guarantees:

* the access and secret keys (``access_key``/``secret_key``, from ``--config`` or the environment) are given
  to one ``boto3`` client bound to the configured endpoint (``endpoint``; path-style addressing there), and
  to nothing else; without keys the client uses the standard credential chain (e.g. a pod's web identity);
  one key without the other is an error, as in Kthena;
* the prefix is a directory, as ``aws s3 sync`` treats it: every object under ``PREFIX/`` becomes a file named
  by its key relative to it; a prefix that is itself an object's key stages that one object;
* each file is one streaming ``GetObject`` (``Range`` from the partial's size and ``IfMatch`` on the listed
  ETag when resuming), read in blocks in a worker thread.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import AsyncGenerator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from kthena_py.sourceid import SourceIdentity, from_s3_head, from_s3_listing

from ..config import Settings
from ..plan import RemoteFile
from ..result import DownloadError, Reason
from .base import Listing, Stream, TransientError

BLOCK = 4 * 1024 * 1024
_NOT_FOUND = {"NoSuchBucket", "NoSuchKey", "404", "NotFound"}
_DENIED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}


def _error(exc: Exception, where: str) -> Exception:
    if isinstance(exc, NoCredentialsError):
        return DownloadError(Reason.ACCESS_DENIED, f"{where}: no S3 credentials (set ACCESS_KEY and SECRET_KEY)")
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _NOT_FOUND:
            return DownloadError(Reason.SOURCE_NOT_FOUND, f"{where}: {code}")
        if code in _DENIED:
            return DownloadError(Reason.ACCESS_DENIED, f"{where}: {code}")
        if code in ("PreconditionFailed", "412"):
            return DownloadError(Reason.DOWNLOAD_FAILED, f"{where}: the object changed during the download")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if isinstance(status, int) and (status >= 500 or status == 429):
            return TransientError(f"{where}: {code}")
        return DownloadError(Reason.DOWNLOAD_FAILED, f"{where}: {code}")
    return TransientError(f"{where}: {type(exc).__name__}")


class S3Source:
    """Objects under an S3 prefix."""

    def __init__(self, scheme: str, bucket: str, prefix: str, settings: Settings, connections: int) -> None:
        if (settings.access_key is None) != (settings.secret_key is None):
            raise DownloadError(
                Reason.INVALID_ARGUMENTS, "Missing credentials: give both access_key and secret_key (or neither)"
            )
        if scheme == "obs" and not settings.endpoint:
            raise DownloadError(Reason.INVALID_ARGUMENTS, "obs:// needs the endpoint setting (ENDPOINT)")
        self._where = f"{scheme}://{bucket}/{prefix}"
        self._bucket = bucket
        self._prefix = prefix
        kwargs: dict[str, Any] = {
            "config": Config(
                max_pool_connections=max(10, connections),
                retries={"max_attempts": 3, "mode": "standard"},
                s3={"addressing_style": "path"} if settings.endpoint else {},
            )
        }
        if settings.endpoint:
            kwargs["endpoint_url"] = settings.endpoint
        if settings.access_key is not None and settings.secret_key is not None:
            kwargs["aws_access_key_id"] = settings.access_key.reveal()
            kwargs["aws_secret_access_key"] = settings.secret_key.reveal()
        session = boto3.session.Session()
        if session.region_name is None:
            kwargs["region_name"] = "us-east-1"
        self._client: Any = session.client("s3", **kwargs)

    def _list(self) -> tuple[list[RemoteFile], SourceIdentity | None]:
        base = self._prefix.rstrip("/") + "/" if self._prefix.strip("/") else ""
        files: list[RemoteFile] = []
        objects: list[dict[str, Any]] = []
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=base):
            for obj in page.get("Contents", []):
                key = str(obj["Key"])
                if key.endswith("/"):
                    continue  # a "directory" placeholder object
                etag = str(obj.get("ETag", ""))
                files.append(RemoteFile(key[len(base) :], int(obj["Size"]), None, f"etag:{etag}", key))
                objects.append(obj)
        if not files and base:
            try:
                head = self._client.head_object(Bucket=self._bucket, Key=self._prefix)
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code", "")) in _NOT_FOUND:
                    return [], None
                raise
            etag = str(head.get("ETag", ""))
            name = posixpath.basename(self._prefix)
            files.append(RemoteFile(name, int(head["ContentLength"]), None, f"etag:{etag}", self._prefix))
            return files, from_s3_head(head)
        return files, from_s3_listing(objects)

    async def list(self) -> Listing:
        """List the objects under the prefix."""
        try:
            files, identity = await asyncio.to_thread(self._list)
        except (ClientError, BotoCoreError) as exc:
            error = _error(exc, self._where)
            if isinstance(error, TransientError):
                raise DownloadError(Reason.DOWNLOAD_FAILED, str(error)) from None
            raise error from None
        if not files:
            raise DownloadError(Reason.SOURCE_NOT_FOUND, f"{self._where}: no objects")
        return Listing(tuple(files), identity=identity)

    def _get(self, file: RemoteFile, offset: int) -> Any:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": file.locator}
        if offset:
            kwargs["Range"] = f"bytes={offset}-"
            if file.identity.startswith("etag:") and len(file.identity) > 5:
                kwargs["IfMatch"] = file.identity[5:]
        return self._client.get_object(**kwargs)

    async def open(self, file: RemoteFile, offset: int) -> Stream:
        """One streaming GetObject from ``offset``."""
        where = f"{self._where} {file.name}"
        try:
            response = await asyncio.to_thread(self._get, file, offset)
        except (ClientError, BotoCoreError) as exc:
            raise _error(exc, where) from None
        content_range = str(response.get("ContentRange", ""))
        start = offset if offset and content_range.startswith(f"bytes {offset}-") else 0
        return Stream(start, self._blocks(response["Body"], where))

    async def _blocks(self, body: Any, where: str) -> AsyncGenerator[bytes, None]:
        try:
            while True:
                try:
                    block = await asyncio.to_thread(body.read, BLOCK)
                except (BotoCoreError, OSError) as exc:
                    raise TransientError(f"{where}: {type(exc).__name__} while reading") from None
                if not block:
                    return
                yield block
        finally:
            body.close()

    async def close(self) -> None:
        """Close the client's connections."""
        self._client.close()
