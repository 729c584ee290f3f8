"""Serving certificates for admission webhooks: generation, rotation, a shared Secret and ``caBundle``.

The manager can look after its own webhook certificate (``--webhook-cert-mode=self``), so that installing it
needs nothing but its manifests. This module does that, knowing nothing of Kthena:

* :func:`generate` makes a self-signed CA (ECDSA P-256) and a serving certificate it signed for the given DNS
  names and IP addresses. Everything is PEM.
* :class:`CertificateManager` keeps the certificates in one Secret (type ``kubernetes.io/tls``: ``tls.crt``,
  ``tls.key``, plus ``ca.crt``, the trust bundle, and ``ca.key``), so every replica of the manager serves the same
  certificate. :meth:`~CertificateManager.ensure` reads the Secret; if it is missing, unreadable, for other
  names, not signed by its CA, or expires within ``rotate_before``, one replica writes a new one. Writes carry
  the ``resourceVersion`` they were based on, so of two replicas racing only one write succeeds and the other
  adopts it: a certificate is never replaced by a concurrent replica's.
* The serving certificate is renewed with the same CA, so the ``caBundle`` the API server trusts stays valid.
  When the CA itself nears its end (less than two serving-certificate lifetimes left) a new CA is made and
  the bundle holds both (new first) until the old one expires: replicas still serving a certificate of the old
  CA stay trusted until they pick up the new one.
* :meth:`~CertificateManager.inject_ca_bundle` writes ``ca.crt`` into ``clientConfig.caBundle`` of every webhook
  of the named Validating/MutatingWebhookConfigurations (JSON patches guarded by a ``test`` of each webhook's
  name, so a concurrently edited configuration is never patched at the wrong index). A missing configuration
  is skipped (logged) and retried on the next pass.
* :meth:`~CertificateManager.run` repeats both every ``check_interval`` seconds for as long as it runs, and keeps
  going after API errors; :meth:`~CertificateManager.current` is a certificate source for
  :class:`kthena_py.runtime.webhook.WebhookServer`.

The clock is injectable (``now``) so rotation is testable without waiting.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound, ResourceType
from kthena_py.kube.resources import MUTATING_WEBHOOKS, SECRETS, VALIDATING_WEBHOOKS

__all__ = [
    "CertificateManager",
    "KeyPair",
    "ServingCertificates",
    "generate",
    "new_ca",
    "new_serving_cert",
    "rotation_reason",
]

log = structlog.get_logger("kthena_py.certs")

Now = Callable[[], datetime.datetime]

CA_VALIDITY = datetime.timedelta(days=3650)
CERT_VALIDITY = datetime.timedelta(days=365)
ROTATE_BEFORE = datetime.timedelta(days=30)
_BACKDATE = datetime.timedelta(minutes=5)
_SECRET_TYPE = "kubernetes.io/tls"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8) private key.

    Attributes:
        cert: The certificate.
        key: The private key.
    """

    cert: bytes
    key: bytes


@dataclass(frozen=True)
class ServingCertificates:
    """Everything a webhook server and the API server need.

    Attributes:
        ca: The CA that signs serving certificates.
        serving: The serving certificate and key.
        ca_bundle: The CAs clients should trust (PEM, the current CA first); the ``caBundle``.
    """

    ca: KeyPair
    serving: KeyPair
    ca_bundle: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(common_name: str, *, now: datetime.datetime, validity: datetime.timedelta = CA_VALIDITY) -> KeyPair:
    """Create a self-signed CA.

    Args:
        common_name: Subject CN.
        now: Start of validity (backdated five minutes for clock skew).
        validity: Lifetime from ``now``.

    Returns:
        The CA certificate and key.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def new_serving_cert(
    ca: KeyPair,
    hosts: Sequence[str],
    *,
    now: datetime.datetime,
    validity: datetime.timedelta = CERT_VALIDITY,
) -> KeyPair:
    """Create a serving (server-auth) certificate signed by ``ca``.

    Args:
        ca: The signing CA.
        hosts: DNS names and IP addresses (the first one of at most 64 characters is also the CN); at least
            one.
        now: Start of validity (backdated five minutes).
        validity: Lifetime from ``now``; capped at the CA's end of validity.

    Returns:
        The certificate and key.

    Raises:
        ValueError: ``hosts`` is empty.
    """
    if not hosts:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    # The CN is informational (clients match the SANs) and limited to 64 characters.
    common_name = next((host for host in hosts if len(host) <= 64), "webhook")
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_san(host) for host in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate(
    hosts: Sequence[str],
    *,
    now: datetime.datetime,
    ca: KeyPair | None = None,
    extra_trusted: Sequence[bytes] = (),
    ca_name: str = "kthena-py-webhook-ca",
    ca_validity: datetime.timedelta = CA_VALIDITY,
    cert_validity: datetime.timedelta = CERT_VALIDITY,
) -> ServingCertificates:
    """Create serving certificates, with a new CA unless one is given.

    Args:
        hosts: DNS names and IP addresses of the server.
        now: The current time.
        ca: Reuse this CA (renewal); ``None`` makes a new one.
        extra_trusted: CA certificates (PEM) to keep in the bundle after the current CA.
        ca_name: CN of a new CA.
        ca_validity: Lifetime of a new CA.
        cert_validity: Lifetime of the serving certificate.

    Returns:
        The certificates.
    """
    authority = ca or new_ca(ca_name, now=now, validity=ca_validity)
    serving = new_serving_cert(authority, hosts, now=now, validity=cert_validity)
    bundle = b"".join([authority.cert, *(pem for pem in extra_trusted if pem.strip() != authority.cert.strip())])
    return ServingCertificates(authority, serving, bundle)


def _certs(pem: bytes) -> list[x509.Certificate]:
    try:
        return list(x509.load_pem_x509_certificates(pem))
    except ValueError:
        return []


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _hosts_of(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    hosts = {str(name) for name in san.get_values_for_type(x509.DNSName)}
    hosts.update(str(address) for address in san.get_values_for_type(x509.IPAddress))
    return hosts


def _public_bytes(key: Any) -> bytes:
    """DER SubjectPublicKeyInfo of a public key, or of a private key's public half."""
    public = key.public_key() if hasattr(key, "public_key") else key
    der: bytes = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def rotation_reason(
    certificates: ServingCertificates,
    hosts: Sequence[str],
    *,
    now: datetime.datetime,
    rotate_before: datetime.timedelta = ROTATE_BEFORE,
    cert_validity: datetime.timedelta = CERT_VALIDITY,
) -> str | None:
    """Say why ``certificates`` must be replaced, or ``None`` when they are fine.

    Args:
        certificates: What the Secret holds.
        hosts: The names the serving certificate must cover.
        now: The current time.
        rotate_before: Renew this long before the serving certificate expires.
        cert_validity: Lifetime of a serving certificate: a CA with less than two of them left is replaced.

    Returns:
        A short reason (for logs), or ``None``.
    """
    ca_certs, leaf_certs = _certs(certificates.ca.cert), _certs(certificates.serving.cert)
    if len(ca_certs) != 1 or not leaf_certs:
        return "unreadable certificate"
    ca_cert, leaf = ca_certs[0], leaf_certs[0]
    try:
        ca_key = serialization.load_pem_private_key(certificates.ca.key, password=None)
        leaf_key = serialization.load_pem_private_key(certificates.serving.key, password=None)
    except (ValueError, TypeError):
        return "unreadable private key"
    if _public_bytes(ca_key) != _public_bytes(ca_cert.public_key()):
        return "CA key does not match the CA certificate"
    if _public_bytes(leaf_key) != _public_bytes(leaf.public_key()):
        return "key does not match the serving certificate"
    try:
        leaf.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "serving certificate not signed by the CA"
    if ca_cert.not_valid_after_utc - now < 2 * cert_validity:
        return "CA expires soon"
    if leaf.not_valid_after_utc - now < rotate_before:
        return "serving certificate expires soon"
    if leaf.not_valid_before_utc > now:
        return "serving certificate not yet valid"
    missing = {host for host in hosts if host not in _hosts_of(leaf)}
    if missing:
        return f"serving certificate lacks {', '.join(sorted(missing))}"
    if ca_cert.public_bytes(serialization.Encoding.DER) not in {
        cert.public_bytes(serialization.Encoding.DER) for cert in _certs(certificates.ca_bundle)
    }:
        return "CA missing from the trust bundle"
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _secret_data(certificates: ServingCertificates) -> dict[str, str]:
    return {
        "tls.crt": _b64(certificates.serving.cert),
        "tls.key": _b64(certificates.serving.key),
        "ca.crt": _b64(certificates.ca_bundle),
        "ca.key": _b64(certificates.ca.key),
    }


def _from_secret(secret: dict[str, object]) -> ServingCertificates | None:
    data = secret.get("data")
    if not isinstance(data, dict):
        return None
    try:
        fields = {
            key: base64.b64decode(str(data[key]), validate=True) for key in ("tls.crt", "tls.key", "ca.crt", "ca.key")
        }
    except (KeyError, ValueError):
        return None
    bundle = _certs(fields["ca.crt"])
    if not bundle:
        return None
    ca = KeyPair(_pem(bundle[0]), fields["ca.key"])
    return ServingCertificates(ca, KeyPair(fields["tls.crt"], fields["tls.key"]), fields["ca.crt"])


class CertificateManager:
    """Keeps a webhook serving certificate in a Secret and its CA in webhook configurations.

    Args:
        client: The API client.
        namespace: Namespace of the Secret.
        secret_name: Name of the Secret.
        hosts: DNS names (and IPs) the certificate must cover, e.g. ``svc.ns.svc``.
        validating_webhooks: ValidatingWebhookConfigurations whose ``caBundle`` to keep up to date.
        mutating_webhooks: MutatingWebhookConfigurations likewise.
        now: The clock (UTC, timezone-aware).
        cert_validity: Lifetime of a serving certificate.
        ca_validity: Lifetime of a CA.
        rotate_before: Renew this long before the serving certificate expires.
        check_interval: Seconds between passes of :meth:`run`.

    Raises:
        ValueError: The lifetimes would make every pass rotate (``cert_validity <= rotate_before`` or
            ``ca_validity <= 2 * cert_validity + rotate_before``).
    """

    def __init__(
        self,
        client: KubeApi,
        *,
        namespace: str,
        secret_name: str,
        hosts: Sequence[str],
        validating_webhooks: Sequence[str] = (),
        mutating_webhooks: Sequence[str] = (),
        now: Now = _utcnow,
        cert_validity: datetime.timedelta = CERT_VALIDITY,
        ca_validity: datetime.timedelta = CA_VALIDITY,
        rotate_before: datetime.timedelta = ROTATE_BEFORE,
        check_interval: float = 600.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.secret_name = secret_name
        self.hosts = list(hosts)
        self.configs: list[tuple[ResourceType, str]] = [
            *((VALIDATING_WEBHOOKS, name) for name in validating_webhooks),
            *((MUTATING_WEBHOOKS, name) for name in mutating_webhooks),
        ]
        self.now = now
        self.cert_validity = cert_validity
        self.ca_validity = ca_validity
        self.rotate_before = rotate_before
        self.check_interval = check_interval
        if cert_validity <= rotate_before or ca_validity <= 2 * cert_validity + rotate_before:
            raise ValueError("need cert_validity > rotate_before and ca_validity > 2 * cert_validity + rotate_before")
        self._current: ServingCertificates | None = None
        self.ready = asyncio.Event()

    def current(self) -> tuple[bytes, bytes] | None:
        """The serving certificate chain and key last read or written, or ``None`` before the first pass."""
        if self._current is None:
            return None
        return self._current.serving.cert, self._current.serving.key

    @property
    def certificates(self) -> ServingCertificates | None:
        """The certificates last read or written."""
        return self._current

    def _usable_ca(self, stored: ServingCertificates, now: datetime.datetime) -> KeyPair | None:
        """The stored CA when it can sign the next certificate, else ``None`` (a new CA is needed)."""
        ca_certs = _certs(stored.ca.cert)
        if len(ca_certs) != 1:
            return None
        try:
            key = serialization.load_pem_private_key(stored.ca.key, password=None)
        except (ValueError, TypeError):
            return None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            return None
        if _public_bytes(key) != _public_bytes(ca_certs[0].public_key()):
            return None
        if ca_certs[0].not_valid_after_utc - now < 2 * self.cert_validity:
            return None
        return stored.ca

    def _renewed(self, stored: ServingCertificates | None, now: datetime.datetime) -> ServingCertificates:
        """New certificates: same CA while it is usable, else a new CA trusted next to the old ones."""
        if stored is None:
            return generate(self.hosts, now=now, ca_validity=self.ca_validity, cert_validity=self.cert_validity)
        keep = [_pem(cert) for cert in _certs(stored.ca_bundle) if cert.not_valid_after_utc > now]
        return generate(
            self.hosts,
            now=now,
            ca=self._usable_ca(stored, now),
            extra_trusted=keep,
            ca_validity=self.ca_validity,
            cert_validity=self.cert_validity,
        )

    async def ensure(self) -> ServingCertificates:
        """Read the Secret and create or renew it when needed (see the module docstring).

        Returns:
            The certificates now in the Secret.

        Raises:
            ApiError: The API server refused a read or write for a reason other than a lost race.
        """
        for _ in range(5):
            now = self.now()
            try:
                secret = await self.client.get(SECRETS, self.secret_name, self.namespace)
            except NotFound:
                secret = None
            stored = _from_secret(secret) if secret is not None else None
            reason = "missing" if secret is None else "unreadable Secret" if stored is None else None
            if stored is not None:
                reason = rotation_reason(
                    stored, self.hosts, now=now, rotate_before=self.rotate_before, cert_validity=self.cert_validity
                )
            if reason is None and stored is not None:
                self._adopt(stored)
                return stored
            fresh = self._renewed(stored, now)
            body: dict[str, object] = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.secret_name, "namespace": self.namespace},
                "type": _SECRET_TYPE,
                "data": _secret_data(fresh),
            }
            try:
                if secret is None:
                    await self.client.create(SECRETS, body, self.namespace)
                else:
                    metadata = dict(secret.get("metadata") or {})
                    body["metadata"] = metadata
                    body["type"] = secret.get("type", _SECRET_TYPE)
                    await self.client.replace(SECRETS, body, self.namespace)
            except (AlreadyExists, Conflict):
                continue  # another replica wrote first: adopt what it wrote
            log.info("webhook certificate written", secret=self.secret_name, namespace=self.namespace, reason=reason)
            self._adopt(fresh)
            return fresh
        raise ApiError(409, "Conflict", f"Secret {self.namespace}/{self.secret_name} kept changing")

    def _adopt(self, certificates: ServingCertificates) -> None:
        self._current = certificates
        self.ready.set()

    async def inject_ca_bundle(self, ca_bundle: bytes | None = None) -> None:
        """Write the trust bundle into ``caBundle`` of every webhook of the configured configurations.

        Args:
            ca_bundle: The PEM bundle; default: the bundle of the certificates last read or written.
        """
        bundle = ca_bundle if ca_bundle is not None else (self._current.ca_bundle if self._current else None)
        if bundle is None:
            return
        wanted = _b64(bundle)
        for resource, name in self.configs:
            try:
                config = await self.client.get(resource, name)
            except NotFound:
                log.warning("webhook configuration not found; caBundle not injected", kind=resource.kind, name=name)
                continue
            patch: list[dict[str, object]] = []
            for index, hook in enumerate(config.get("webhooks") or []):
                client_config = hook.get("clientConfig") or {}
                if client_config.get("caBundle") == wanted:
                    continue
                patch.append({"op": "test", "path": f"/webhooks/{index}/name", "value": hook.get("name")})
                patch.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": wanted})
            if patch:
                await self.client.patch(resource, name, patch, patch_type="json")
                log.info("caBundle injected", kind=resource.kind, name=name)

    async def run_once(self) -> None:
        """One pass: :meth:`ensure`, then :meth:`inject_ca_bundle`."""
        certificates = await self.ensure()
        await self.inject_ca_bundle(certificates.ca_bundle)

    async def run(self) -> None:
        """Repeat :meth:`run_once` every ``check_interval`` seconds until cancelled.

        Failures (API errors and unexpected ones alike) are logged and retried with exponential backoff from 1 s
        up to ``check_interval``.
        """
        delay = 1.0
        while True:
            try:
                await self.run_once()
                delay = 1.0
                await asyncio.sleep(self.check_interval)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                log.warning("webhook certificate pass failed; retrying", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.check_interval)
            except Exception:  # a bug must not stop certificate upkeep for the life of the process
                log.exception("webhook certificate pass failed unexpectedly; retrying", retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.check_interval)
