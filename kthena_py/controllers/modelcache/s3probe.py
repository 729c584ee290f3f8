"""The S3 revalidation probe: the one module of the manager that may load botocore, and only lazily.

The manager's image installs botocore alone (the ``revalidate`` extra), not the downloader's clients, and the
import-linter contract "Only the downloader imports the download clients" keeps every other manager module from
loading them.
This module imports botocore inside :func:`probe_s3`, on the first probe of an S3 source: a manager without it
raises :class:`ModuleNotFoundError` there (the caller reports ``RevalidationUnsupported`` and names the missing
extra) and pays nothing at start-up.

Requests: ``ListObjectsV2`` of ``<prefix>/`` (every page), and ``HeadObject`` of the key when the listing is
empty (a one-object source), exactly as the downloader lists; the answers go through
:func:`kthena_py.sourceid.from_s3_listing` / :func:`~kthena_py.sourceid.from_s3_head`, so the identities compare
with what the downloader reported. Blocking: the caller runs it in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kthena_py.sourceid import RemoteSource, SourceIdentity, from_s3_head, from_s3_listing

__all__ = ["S3Settings", "probe_s3"]


@dataclass(frozen=True)
class S3Settings:
    """Endpoint, keys (``None``: anonymous) and the timeout of one probe."""

    endpoint: str | None
    access_key: str | None
    secret_key: str | None
    timeout: float

    def __repr__(self) -> str:
        return f"S3Settings(endpoint={self.endpoint!r}, timeout={self.timeout!r})"


def probe_s3(remote: RemoteSource, settings: S3Settings) -> SourceIdentity | None:
    """The identity of the objects ``remote`` names.

    Raises:
        ModuleNotFoundError: botocore is not installed.
        LookupError: The request failed (the message names the status, never a credential).
    """
    import botocore.session  # lazily: see the module docstring
    from botocore import UNSIGNED
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    session = botocore.session.get_session()
    anonymous = settings.access_key is None or settings.secret_key is None
    config = Config(
        connect_timeout=settings.timeout,
        read_timeout=settings.timeout,
        retries={"max_attempts": 1},
        s3={"addressing_style": "path"} if settings.endpoint else {},
        signature_version=UNSIGNED if anonymous else None,
    )
    client: Any = session.create_client(
        "s3",
        region_name=session.get_config_variable("region") or "us-east-1",
        endpoint_url=settings.endpoint or None,
        aws_access_key_id=None if anonymous else settings.access_key,
        aws_secret_access_key=None if anonymous else settings.secret_key,
        config=config,
    )
    base = remote.prefix.rstrip("/") + "/" if remote.prefix.strip("/") else ""
    where = f"{remote.scheme or 's3'}://{remote.location}/{remote.prefix}"
    try:
        objects: list[dict[str, Any]] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=remote.location, Prefix=base):
            objects.extend(page.get("Contents", []))
        found = from_s3_listing(objects)
        if found is not None or not base:
            return found
        return from_s3_head(client.head_object(Bucket=remote.location, Key=remote.prefix))
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", "")) or "error"
        raise LookupError(f"{where}: {code}") from None
    except BotoCoreError as exc:
        raise LookupError(f"{where}: {type(exc).__name__}") from None
    finally:
        client.close()
