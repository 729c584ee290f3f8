"""A tiny synchronous HTTPS client for the loopback kube-apiserver (standard library only).

The harness needs a handful of API calls (readiness, namespaces, CRDs, Nodes, Queues) before any
real client is configured, and must not depend on the rest of :mod:`kthena_py`. This module is that
minimum.

Guarantees:

* TLS is always verified against the serving CA of the run; the client authenticates with a client
  certificate. There is no way to disable verification.
* One connection per request: instances are safe to share between threads.
* Bodies are JSON; a mapping body is serialised, ``str``/``bytes`` are sent as they are.
* :meth:`KubeHTTP.request` raises :class:`ApiError` for any status outside ``ok``; :meth:`KubeHTTP.raw`
  never raises for an HTTP status.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

__all__ = ["MERGE_PATCH", "STRATEGIC_MERGE_PATCH", "ApiError", "KubeHTTP"]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """The apiserver answered with an unexpected HTTP status.

    Attributes:
        status: HTTP status code.
        body: Decoded response body (a ``Status`` dict usually, else text).
        method: Request method.
        path: Request path.
    """

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> HTTP {status}: {message}")
        self.method = method
        self.path = path
        self.status = status
        self.body = body


class KubeHTTP:
    """Minimal client for one apiserver.

    Args:
        server: Base URL, ``https://127.0.0.1:<port>``.
        ca_file: PEM file of the CA that signed the serving certificate.
        cert_file: Client certificate.
        key_file: Client key.
        timeout: Socket timeout per request, seconds.
    """

    def __init__(self, server: str, ca_file: Path, cert_file: Path, key_file: Path, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or not parsed.hostname or not parsed.port:
            raise ValueError(f"expected https://host:port, got {server!r}")
        self.server = server
        self._host = parsed.hostname
        self._port = parsed.port
        self._timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._ssl.load_cert_chain(str(cert_file), str(key_file))

    def raw(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | str | bytes | None = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, Any]:
        """Send one request.

        Args:
            method: HTTP method.
            path: Absolute path (``/api/v1/namespaces``).
            body: JSON body.
            content_type: Body content type (use :data:`MERGE_PATCH` etc. for PATCH).
            query: Query parameters.
            timeout: Overrides the instance timeout.

        Returns:
            The status and the decoded body (JSON if it parses, else text).

        Raises:
            OSError: Connection or TLS failure.
        """
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection(self._host, self._port, context=self._ssl, timeout=timeout or self._timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            status = resp.status
        finally:
            conn.close()
        text = payload.decode(errors="replace")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | str | bytes | None = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        ok: Collection[int] = (200, 201, 202),
    ) -> Any:
        """Send one request and check the status.

        Args:
            method: HTTP method.
            path: Absolute path.
            body: JSON body.
            content_type: Body content type.
            query: Query parameters.
            ok: Accepted statuses.

        Returns:
            The decoded body.

        Raises:
            ApiError: The status is not in ``ok``.
            OSError: Connection or TLS failure.
        """
        status, decoded = self.raw(method, path, body, content_type=content_type, query=query)
        if status not in ok:
            raise ApiError(method, path, status, decoded)
        return decoded

    def get(self, path: str, *, query: Mapping[str, str] | None = None) -> Any:
        """GET ``path``; see :meth:`request`.

        Args:
            path: Absolute path.
            query: Query parameters.

        Returns:
            The decoded body.
        """
        return self.request("GET", path, query=query)

    def create(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` to the collection ``path``; see :meth:`request`.

        Args:
            path: Collection path.
            body: Object.

        Returns:
            The created object.
        """
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> Any:
        """Apply a JSON merge patch; see :meth:`request`.

        Args:
            path: Object (or subresource) path.
            body: Patch.

        Returns:
            The patched object.
        """
        return self.request("PATCH", path, body, content_type=MERGE_PATCH)

    def delete(self, path: str, body: Mapping[str, Any] | None = None, *, missing_ok: bool = True) -> Any:
        """DELETE ``path``; see :meth:`request`.

        Args:
            path: Object path.
            body: Optional ``DeleteOptions``.
            missing_ok: Treat 404 as success.

        Returns:
            The decoded body (None for a missing object).
        """
        ok = (200, 202, 404) if missing_ok else (200, 202)
        return self.request("DELETE", path, body, ok=ok)
