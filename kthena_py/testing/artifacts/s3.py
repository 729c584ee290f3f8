"""An S3-compatible server on 127.0.0.1: moto's threaded server (from PyPI), for ``s3://`` tests.

Guarantees: :func:`s3_server` binds 127.0.0.1 on a free port, yields its endpoint URL and stops the server at
the end; moto accepts any access key, so tests seed buckets with the same keys they hand the downloader.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer


@contextmanager
def s3_server() -> Iterator[str]:
    """Run moto's S3 on loopback; yields ``http://127.0.0.1:PORT``."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
