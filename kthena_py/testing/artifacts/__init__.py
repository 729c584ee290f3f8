"""Loopback servers for the downloader's tests: an artifact server with a fake Hugging Face hub, and S3 (moto).

Nothing here imports :mod:`kthena_py.download`: the servers are written from the protocols, so the tests
check the downloader against them, not against itself.
"""

from .server import Artifact, ArtifactServer, HubRepo, RecordedRequest

__all__ = ["Artifact", "ArtifactServer", "HubRepo", "RecordedRequest"]
