"""Revalidation probes: ask a cache's remote source for its identity with metadata requests only.

What is requested (never a body of model weights):

* ``http(s)://``: one ``HEAD`` of the URL, following redirects (at most :data:`MAX_REDIRECTS`);
* Hugging Face: ``GET {HF_ENDPOINT}/api/models/{repo}/revision/{revision or main}?blobs=true`` (the commit the
  revision resolves to and the files' sizes);
* S3 (``s3://``, ``obs://``): ``ListObjectsV2`` of the prefix (all pages), or ``HeadObject`` of a one-object key,
  through botocore (:mod:`.s3probe`, only when the manager has it installed);
* ModelScope: not probed (``RevalidationUnsupported``).

Guarantees:

* Endpoints and credentials come only from the cache's ``sourceSecretRef`` Secret (read with one GET per probe;
  ``HF_ENDPOINT``, ``HF_TOKEN``/``HF_AUTH_TOKEN``, ``ENDPOINT``, ``ACCESS_KEY``/``SECRET_KEY``), never from the
  manager's own environment. A credential is sent only to its own origin: the hub token to ``HF_ENDPOINT``'s
  origin, a URL's user-info (Basic) to that URL's origin; a redirect to another origin drops it.
* At most ``concurrency`` probes run at a time across every cache of the manager (one semaphore), and each takes
  at most ``timeout`` seconds, the Secret's read included.
* :meth:`Prober.probe` never raises: a failure is a :class:`~kthena_py.plan.modelcache.refresh.Probe` with
  ``error`` (its message holds no credential), so a probe can never fail a reconcile.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

import aiohttp
import structlog

from kthena_py.api.modelcache import ModelCache
from kthena_py.kube import KubeApi
from kthena_py.kube.errors import ApiError
from kthena_py.kube.resources import SECRETS
from kthena_py.plan.modelcache.refresh import Probe
from kthena_py.sourceid import RemoteSource, SourceIdentity, from_http_headers, from_hub_revision, remote_source

from . import metrics
from .s3probe import S3Settings, probe_s3

__all__ = [
    "DEFAULT_HF_ENDPOINT",
    "MAX_REDIRECTS",
    "Credentials",
    "Prober",
    "credentials_of",
    "origin",
    "probe_fields",
]

log = structlog.get_logger("kthena_py.modelcache.revalidate")

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
"""The hub's endpoint when the Secret names none (the downloader's default too)."""
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class Credentials:
    """What a probe may use from the cache's Secret (``repr`` never shows a secret value)."""

    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    hf_token: str | None = None
    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None

    def __repr__(self) -> str:
        return f"Credentials(hf_endpoint={self.hf_endpoint!r}, endpoint={self.endpoint!r})"


def _first(data: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = data.get(key)
        if value:
            return value
    return None


def credentials_of(data: Mapping[str, str]) -> Credentials:
    """The probe's credentials from a Secret's decoded data (the downloader's key names; empty means unset)."""
    return Credentials(
        hf_endpoint=(_first(data, "HF_ENDPOINT") or DEFAULT_HF_ENDPOINT).rstrip("/"),
        hf_token=_first(data, "HF_AUTH_TOKEN", "HF_TOKEN"),
        endpoint=_first(data, "ENDPOINT", "AWS_ENDPOINT_URL"),
        access_key=_first(data, "ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
        secret_key=_first(data, "SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
    )


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: scheme, host, port (default ports made explicit)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _strip_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without user-info, and the ``Authorization`` value (Basic) the user-info stands for."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return clean, "Basic " + base64.b64encode(pair.encode()).decode()


def probe_fields(probe: Probe) -> dict[str, Any]:
    """A probe's outcome as log fields (no credential: identities and messages only)."""
    if probe.identity is not None:
        return {"outcome": "identity", **probe.identity.to_json()}
    return {"outcome": "unsupported" if probe.unsupported else "failed", "why": probe.unsupported or probe.error}


class ProbeError(Exception):
    """A probe's failure, in words that hold no credential."""


class Prober:
    """Probes caches' sources, bounded across the manager (see the module docstring)."""

    def __init__(
        self,
        client: KubeApi,
        *,
        concurrency: int = 4,
        timeout: float = 10.0,
    ) -> None:
        self._client = client
        self._gate = asyncio.Semaphore(max(1, concurrency))
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the HTTP session (the manager calls this when it stops)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._session

    async def probe(self, mc: ModelCache, at: float) -> Probe | None:
        """Probe ``mc``'s source (``None`` when it is not remote); never raises.

        Args:
            mc: The cache.
            at: The reconcile's clock reading, recorded as the probe's time (``status.lastRevalidated``).
        """
        remote = remote_source(mc.spec.source)
        if remote is None:
            return None
        async with self._gate:
            started = at
            try:
                identity = await asyncio.wait_for(self._identity(mc, remote), self._timeout)
            except _Unsupported as exc:
                metrics.REVALIDATIONS.labels("unsupported").inc()
                return Probe(started, unsupported=str(exc))
            except TimeoutError:
                metrics.REVALIDATIONS.labels("failed").inc()
                return Probe(started, error=f"no answer within {self._timeout:g}s")
            except ProbeError as exc:
                metrics.REVALIDATIONS.labels("failed").inc()
                return Probe(started, error=str(exc))
            except Exception as exc:  # an unforeseen client error: a failed probe, never a failed reconcile
                log.warning("revalidation probe failed", cache=f"{mc.namespace}/{mc.name}", error=type(exc).__name__)
                metrics.REVALIDATIONS.labels("failed").inc()
                return Probe(started, error=f"{type(exc).__name__} while probing the source")
            metrics.REVALIDATIONS.labels("succeeded").inc()
            if identity is None:
                return Probe(started, error="the source's answer identifies no content (no ETag, length or date)")
            return Probe(started, identity=identity)

    async def _credentials(self, mc: ModelCache) -> Credentials:
        ref = mc.spec.source_secret_ref
        if ref is None:
            return Credentials()
        try:
            secret = await self._client.get(SECRETS, ref.name, mc.namespace)
        except ApiError as exc:
            hint = (
                " (reading source Secrets is opt-in: chart value modelCache.revalidation.readSourceSecrets, "
                "or the manifests/source-secrets component)"
                if exc.status == 403
                else ""
            )
            raise ProbeError(f"cannot read Secret {ref.name}: {exc.status} {exc.reason}{hint}") from None
        data: dict[str, str] = {}
        for key, value in (secret.get("data") or {}).items():
            try:
                data[str(key)] = base64.b64decode(str(value)).decode()
            except (ValueError, UnicodeDecodeError):
                continue
        return credentials_of(data)

    async def _identity(self, mc: ModelCache, remote: RemoteSource) -> SourceIdentity | None:
        if remote.kind == "ms":
            raise _Unsupported("ModelScope sources are not revalidated")
        creds = await self._credentials(mc)
        if remote.kind == "http":
            url, basic = _strip_userinfo(remote.location)
            headers = await self._request("HEAD", url, basic=basic)
            return from_http_headers(headers[1])
        if remote.kind == "hf":
            revision = quote(mc.spec.revision or "main", safe="")
            url = f"{creds.hf_endpoint}/api/models/{remote.location}/revision/{revision}?blobs=true"
            status_body = await self._request("GET", url, bearer=creds.hf_token, read=True)
            return from_hub_revision(status_body[2])
        settings = S3Settings(creds.endpoint, creds.access_key, creds.secret_key, self._timeout)
        try:
            return await asyncio.to_thread(probe_s3, remote, settings)
        except ModuleNotFoundError as exc:
            raise _Unsupported(
                "S3 sources need botocore in the manager (the kthena-py[revalidate] extra): "
                f"{exc.name} is not installed"
            ) from None
        except LookupError as exc:
            raise ProbeError(str(exc)) from None

    async def _request(
        self,
        method: str,
        url: str,
        *,
        basic: str | None = None,
        bearer: str | None = None,
        read: bool = False,
    ) -> tuple[int, dict[str, str], Any]:
        """One metadata request, following redirects by hand so credentials never leave their origin."""
        home = origin(url)
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            headers: dict[str, str] = {"Accept": "application/json"} if read else {}
            own = origin(current) == home
            if bearer and own:
                headers["Authorization"] = f"Bearer {bearer}"
            elif basic and own:
                headers["Authorization"] = basic
            try:
                async with self._http().request(method, current, headers=headers, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308) and response.headers.get("Location"):
                        current = urljoin(current, response.headers["Location"])
                        continue
                    if response.status >= 400:
                        raise ProbeError(f"{_where(url)} answered HTTP {response.status}")
                    body: Any = None
                    if read:
                        try:
                            body = await response.json(content_type=None)
                        except ValueError:
                            raise ProbeError(f"{_where(url)} answered something that is not JSON") from None
                    return response.status, dict(response.headers), body
            except aiohttp.ClientError as exc:
                raise ProbeError(f"cannot reach {_where(url)}: {type(exc).__name__}") from None
        raise ProbeError(f"{_where(url)}: more than {MAX_REDIRECTS} redirects")


def _where(url: str) -> str:
    """The URL without user-info, query or fragment (for messages)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _Unsupported(Exception):
    """This manager cannot probe this kind of source."""
