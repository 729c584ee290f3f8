"""What identifies a model source's content without reading it: one definition for the downloader and the manager.

Pure (no I/O, no clock): the downloader reports the identity of what it staged, the manager's revalidation probes
the source for the identity it has now, and both are built and compared here, so a byte-for-byte unchanged
source never reads as changed because two places spelled its identity differently.

* :mod:`.identity`: :class:`SourceIdentity` (ETag, length, last modification), its compact JSON and
  :func:`same_content`;
* :mod:`.remote`: which sources are remote (:func:`remote_kind`): http(s), Hugging Face, S3; ``pvc://``, local
  paths are not;
* :mod:`.parse`: an identity from an HTTP HEAD's headers, a hub revision answer, an S3 HeadObject or a listing.
"""

from kthena_py.sourceid.identity import MAX_ETAG, SourceIdentity, identity_token, same_content
from kthena_py.sourceid.parse import (
    from_http_headers,
    from_hub_revision,
    from_s3_head,
    from_s3_listing,
    listing_digest,
)
from kthena_py.sourceid.remote import REMOTE_KINDS, RemoteKind, RemoteSource, remote_source

__all__ = [
    "MAX_ETAG",
    "REMOTE_KINDS",
    "RemoteKind",
    "RemoteSource",
    "SourceIdentity",
    "from_http_headers",
    "from_hub_revision",
    "from_s3_head",
    "from_s3_listing",
    "identity_token",
    "listing_digest",
    "remote_source",
    "same_content",
]
