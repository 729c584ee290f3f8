"""A generic admission-webhook server: AdmissionReview over HTTPS, with aiohttp.

The server knows nothing of Kthena: handlers are registered per path and turn an :class:`AdmissionRequest`
into an :class:`AdmissionResponse`.

Guarantees:

* Protocol: ``POST`` only; a ``Content-Type`` other than ``application/json`` gets HTTP 400, as does a body that
  is not an ``AdmissionReview`` (``admission.k8s.io/v1``, or ``v1beta1``) with a ``request.uid``. Every other
  request gets HTTP 200 with an ``AdmissionReview`` of the same ``apiVersion`` whose ``response.uid`` is the
  request's. An unknown path gets 404, a body over ``max_body_bytes`` 413.
* A handler that raises (or does not answer within ``handler_timeout`` seconds) denies the request with code
  500 and the error in the message; the server keeps running. Mutations are RFC 6902 JSON Patches, sent as
  ``patchType: JSONPatch``; a denial carries a ``metav1.Status`` (code, reason, message and optional
  ``details.causes``) that the API server passes on to the client.
* TLS only, TLS 1.2 or newer. The certificate comes from a :data:`CertSource` (a callable returning the PEM
  chain and key, e.g. :class:`FileCertSource` for a mounted Secret or a certificate manager's ``current``);
  :meth:`WebhookServer.start` waits until the source has one. The source is checked every
  ``reload_interval`` seconds and a changed certificate is loaded into the live TLS context, so new
  connections use it without a restart (established connections keep theirs).
* Binds the given host and port (port 0 picks a free port, see :attr:`WebhookServer.port`); tests bind
  127.0.0.1.
* Metrics, as controller-runtime names them: ``controller_runtime_webhook_requests_total{webhook,code}``,
  ``controller_runtime_webhook_requests_in_flight{webhook}`` and
  ``controller_runtime_webhook_latency_seconds{webhook}`` (``webhook`` is the path).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog
from aiohttp import web
from prometheus_client import Counter, Gauge, Histogram

from . import metrics

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "CertSource",
    "FileCertSource",
    "Handler",
    "StatusCause",
    "WebhookServer",
]

log = structlog.get_logger("kthena_py.webhook")

CertSource = Callable[[], tuple[bytes, bytes] | None]
"""Returns the current (PEM certificate chain, PEM private key), or ``None`` while there is none."""

WEBHOOK_REQUESTS: Final = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ("webhook", "code"),
    registry=metrics.REGISTRY,
)
WEBHOOK_IN_FLIGHT: Final = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ("webhook",),
    registry=metrics.REGISTRY,
)
WEBHOOK_LATENCY: Final = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests.",
    ("webhook",),
    registry=metrics.REGISTRY,
)

_REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


@dataclass(frozen=True)
class AdmissionRequest:
    """The ``request`` of an AdmissionReview.

    Attributes:
        uid: Identifies this review; echoed in the response.
        kind: ``{group, version, kind}`` of the object.
        resource: ``{group, version, resource}`` requested.
        sub_resource: The subresource (``""`` for the main resource).
        operation: ``CREATE``, ``UPDATE``, ``DELETE`` or ``CONNECT``.
        name: The object's name (may be empty on CREATE with ``generateName``).
        namespace: The object's namespace.
        object: The new object (``None`` on DELETE).
        old_object: The stored object on UPDATE and DELETE, else ``None``.
        dry_run: Whether the request will not be persisted.
        user_info: Who sent the request.
        raw: The whole ``request`` as received.
    """

    uid: str
    kind: Mapping[str, str]
    resource: Mapping[str, str]
    sub_resource: str
    operation: str
    name: str
    namespace: str
    object: Any
    old_object: Any
    dry_run: bool
    user_info: Mapping[str, Any]
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, request: Mapping[str, Any]) -> AdmissionRequest:
        """Read the ``request`` member of an AdmissionReview (missing members become empty values)."""

        def text(key: str) -> str:
            value = request.get(key)
            return value if isinstance(value, str) else ""

        def mapping(key: str) -> Mapping[str, Any]:
            value = request.get(key)
            return value if isinstance(value, Mapping) else {}

        return cls(
            uid=text("uid"),
            kind=mapping("kind"),
            resource=mapping("resource"),
            sub_resource=text("subResource"),
            operation=text("operation"),
            name=text("name"),
            namespace=text("namespace"),
            object=request.get("object"),
            old_object=request.get("oldObject"),
            dry_run=request.get("dryRun") is True,
            user_info=mapping("userInfo"),
            raw=request,
        )


@dataclass(frozen=True)
class StatusCause:
    """One ``details.causes[]`` entry of a denial: ``reason`` (e.g. ``FieldValueInvalid``), ``message``, ``field``."""

    reason: str
    message: str
    field: str


@dataclass(frozen=True)
class AdmissionResponse:
    """What a handler decides.

    Attributes:
        allowed: Admit the request.
        code: HTTP-style status code of a denial (the API server turns it into the client's status).
        reason: ``metav1.StatusReason`` of a denial, e.g. ``Invalid`` or ``Forbidden``.
        message: Human-readable text of a denial.
        causes: Field-level causes of a denial.
        details: Extra ``details`` members (``name``, ``group``, ``kind``) of a denial.
        patch: JSON Patch operations to apply (mutating webhooks), or ``None``.
        warnings: Warnings to show the client (allowed or not).
    """

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    causes: tuple[StatusCause, ...] = ()
    details: Mapping[str, str] = field(default_factory=dict)
    patch: Sequence[Mapping[str, Any]] | None = None
    warnings: tuple[str, ...] = ()

    @classmethod
    def allow(
        cls, *, patch: Sequence[Mapping[str, Any]] | None = None, warnings: Sequence[str] = ()
    ) -> AdmissionResponse:
        """Admit, optionally with a JSON Patch and warnings."""
        return cls(True, patch=list(patch) if patch else None, warnings=tuple(warnings))

    @classmethod
    def deny(
        cls,
        message: str,
        *,
        code: int = 403,
        reason: str = "Forbidden",
        causes: Sequence[StatusCause] = (),
        details: Mapping[str, str] | None = None,
        warnings: Sequence[str] = (),
    ) -> AdmissionResponse:
        """Refuse with a status."""
        return cls(
            False,
            code=code,
            reason=reason,
            message=message,
            causes=tuple(causes),
            details=dict(details or {}),
            warnings=tuple(warnings),
        )

    def to_dict(self, uid: str) -> dict[str, Any]:
        """Render the ``response`` member of an AdmissionReview."""
        response: dict[str, Any] = {"uid": uid, "allowed": self.allowed}
        if not self.allowed:
            status: dict[str, Any] = {"status": "Failure", "code": self.code, "message": self.message}
            if self.reason:
                status["reason"] = self.reason
            details: dict[str, Any] = dict(self.details)
            if self.causes:
                details["causes"] = [
                    {"reason": cause.reason, "message": cause.message, "field": cause.field} for cause in self.causes
                ]
            if details:
                status["details"] = details
            response["status"] = status
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(list(self.patch)).encode()).decode("ascii")
        if self.warnings:
            response["warnings"] = list(self.warnings)
        return response


Handler = Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]
"""An admission handler: decides one request."""


class FileCertSource:
    """Reads ``tls.crt`` and ``tls.key`` from a directory (e.g. a mounted Secret) on every call.

    Args:
        directory: The directory.
        cert_name: File name of the PEM certificate chain.
        key_name: File name of the PEM private key.
    """

    def __init__(self, directory: str | Path, cert_name: str = "tls.crt", key_name: str = "tls.key") -> None:
        self.directory = Path(directory)
        self.cert_name = cert_name
        self.key_name = key_name

    def __call__(self) -> tuple[bytes, bytes] | None:
        """Return the files' contents, or ``None`` while either is missing or empty."""
        try:
            cert = (self.directory / self.cert_name).read_bytes()
            key = (self.directory / self.key_name).read_bytes()
        except OSError:
            return None
        return (cert, key) if cert.strip() and key.strip() else None


def _load_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a PEM pair into ``context`` (through private temporary files: ssl only reads files)."""
    with tempfile.TemporaryDirectory(prefix="kthena-py-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        context.load_cert_chain(cert_path, key_path)


class WebhookServer:
    """Serves admission handlers over HTTPS.

    Args:
        cert_source: Where the serving certificate comes from.
        host: Address to bind (``0.0.0.0`` in a cluster, ``127.0.0.1`` in tests).
        port: Port to bind; 0 picks a free one.
        reload_interval: Seconds between checks of ``cert_source`` for a new certificate.
        handler_timeout: Seconds a handler may take before the request is denied.
        max_body_bytes: Largest accepted request body.
    """

    def __init__(
        self,
        cert_source: CertSource,
        *,
        host: str = "0.0.0.0",
        port: int = 9443,
        reload_interval: float = 10.0,
        handler_timeout: float = 8.0,
        max_body_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.cert_source = cert_source
        self.host = host
        self.requested_port = port
        self.reload_interval = reload_interval
        self.handler_timeout = handler_timeout
        self.max_body_bytes = max_body_bytes
        self.handlers: dict[str, Handler] = {}
        self.port: int | None = None
        self._context: ssl.SSLContext | None = None
        self._loaded: tuple[bytes, bytes] | None = None
        self._runner: web.AppRunner | None = None
        self.started = asyncio.Event()
        """Set once the server listens (cleared again by :meth:`stop`)."""

    def add_handler(self, path: str, handler: Handler) -> None:
        """Serve ``handler`` at ``path`` (must be called before :meth:`start`)."""
        if not path.startswith("/"):
            raise ValueError(f"webhook path must start with '/': {path!r}")
        self.handlers[path] = handler

    @property
    def serving(self) -> bool:
        """Whether the server is listening with a certificate."""
        return self._runner is not None and self._loaded is not None

    def reload(self) -> bool:
        """Load the certificate source's current pair if it changed.

        Returns:
            Whether a new certificate was loaded.

        Raises:
            ssl.SSLError: The pair is unusable (the previous certificate stays in use).
        """
        pair = self.cert_source()
        if pair is None or pair == self._loaded or self._context is None:
            return False
        _load_pair(self._context, *pair)
        self._loaded = pair
        log.info("webhook serving certificate loaded")
        return True

    async def start(self, *, poll: float = 1.0) -> None:
        """Wait for a certificate, then listen.

        Args:
            poll: Seconds between checks while the source has no certificate.
        """
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._context = context
        waited = 0.0
        while True:
            try:
                if self.reload():
                    break
            except ssl.SSLError as exc:
                log.warning("webhook certificate unusable; waiting for another", error=str(exc))
            if self._loaded is not None:
                break
            if waited % 60.0 < poll:  # at the start, then about once a minute
                log.info("webhook server waiting for its certificate")
            await asyncio.sleep(poll)
            waited += poll
        app = web.Application(client_max_size=self.max_body_bytes)
        for path in self.handlers:
            app.router.add_post(path, self._serve)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.requested_port, ssl_context=context)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.requested_port
        self.started.set()
        log.info("webhook server listening", host=self.host, port=self.port, paths=sorted(self.handlers))

    async def stop(self) -> None:
        """Stop listening."""
        self.started.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def run(self) -> None:
        """Start, then reload the certificate periodically until cancelled (then stop)."""
        try:
            await self.start()
            while True:
                await asyncio.sleep(self.reload_interval)
                try:
                    self.reload()
                except ssl.SSLError as exc:
                    log.warning("new webhook certificate unusable; keeping the current one", error=str(exc))
        finally:
            await self.stop()

    async def _serve(self, request: web.Request) -> web.Response:
        path = request.path
        started = time.monotonic()
        WEBHOOK_IN_FLIGHT.labels(path).inc()
        try:
            response = await self._answer(request)
        finally:
            WEBHOOK_IN_FLIGHT.labels(path).dec()
            WEBHOOK_LATENCY.labels(path).observe(time.monotonic() - started)
        WEBHOOK_REQUESTS.labels(path, str(response.status)).inc()
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.Response(status=400, text=f"contentType={request.content_type}, expected application/json")
        try:
            review = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text=f"request body larger than {self.max_body_bytes} bytes")
        except ValueError as exc:
            return web.Response(status=400, text=f"could not decode the AdmissionReview: {exc}")
        body = review.get("request") if isinstance(review, dict) else None
        api_version = review.get("apiVersion") if isinstance(review, dict) else None
        if not isinstance(body, dict) or not body.get("uid") or api_version not in _REVIEW_VERSIONS:
            return web.Response(status=400, text="expected an admission.k8s.io/v1 AdmissionReview with a request")
        admission = AdmissionRequest.from_dict(body)
        handler = self.handlers[request.path]
        try:
            decision = await asyncio.wait_for(handler(admission), self.handler_timeout)
        except TimeoutError:
            decision = AdmissionResponse.deny("admission handler timed out", code=500, reason="InternalError")
        except Exception as exc:  # a handler bug must not take the server down
            log.exception("admission handler failed", path=request.path, uid=admission.uid)
            decision = AdmissionResponse.deny(f"internal error: {exc}", code=500, reason="InternalError")
        payload = {"apiVersion": api_version, "kind": "AdmissionReview", "response": decision.to_dict(admission.uid)}
        return web.json_response(payload)
