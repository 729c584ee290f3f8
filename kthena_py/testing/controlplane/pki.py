"""Throw-away certificates for a loopback control plane, made with ``cryptography``.

Guarantees:

* Every key is ECDSA P-256 and every certificate is valid from one hour ago for seven days.
* Two independent CAs: the *serving* CA signs only serving certificates (EKU serverAuth) and the
  *client* CA signs only client certificates (EKU clientAuth), so a client certificate can never be
  used as a server certificate and vice versa.
* The kube-apiserver serving certificate has CN ``localhost`` and SANs ``localhost`` and
  ``127.0.0.1``; clients verify it against the serving CA (no ``insecure-skip-tls-verify``).
* The admin client certificate has CN ``admin`` and O ``system:masters``: full access under RBAC.
  :meth:`PKI.issue_client` mints more users (CN = user name, O = groups).
* The service-account signing key pair is written as ``sa.key`` (PKCS#8 private key) and
  ``sa.pub`` (SubjectPublicKeyInfo), the forms ``--service-account-signing-key-file`` and
  ``--service-account-key-file`` accept.
* Private keys are written with mode 0600. Nothing is shared between runs.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["PKI", "CertificateAuthority", "KeyPairFiles"]

_VALIDITY = datetime.timedelta(days=7)
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class KeyPairFiles:
    """A certificate and its private key on disk.

    Attributes:
        cert: PEM certificate path.
        key: PEM private key path.
    """

    cert: Path
    key: Path


def _write(path: Path, data: bytes, *, private: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


class CertificateAuthority:
    """A self-signed CA that issues leaf certificates.

    Args:
        common_name: Subject CN of the CA certificate.
    """

    def __init__(self, common_name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kthena-py-testing"),
            ]
        )
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALIDITY)
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate, PEM encoded."""
        return _cert_pem(self.cert)

    def issue(
        self,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        server: bool = False,
        hosts: tuple[str, ...] = (),
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """Issue a leaf certificate with a fresh key.

        Args:
            common_name: Subject CN (the user name for client certificates).
            organizations: Subject O values (the groups for client certificates).
            server: Issue a serving certificate (EKU serverAuth) instead of a client one.
            hosts: DNS names and IP addresses for the SAN extension.

        Returns:
            The certificate and its private key.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        eku = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


class PKI:
    """All certificates of one control-plane run, written into ``directory``.

    Files (all PEM):

    ``serving-ca.crt``, ``apiserver.crt``/``apiserver.key``, ``client-ca.crt``,
    ``admin.crt``/``admin.key``, ``sa.key``/``sa.pub``, plus whatever :meth:`issue_client` and
    :meth:`issue_serving` write.

    Args:
        directory: Where to write the files (created if missing).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._serving_ca = CertificateAuthority("kthena-py-serving-ca")
        self._client_ca = CertificateAuthority("kthena-py-client-ca")
        self.serving_ca_cert = _write(directory / "serving-ca.crt", self._serving_ca.cert_pem)
        self.client_ca_cert = _write(directory / "client-ca.crt", self._client_ca.cert_pem)
        self.apiserver = self.issue_serving("apiserver", ("localhost", "127.0.0.1"))
        self.admin = self.issue_client("admin", ("system:masters",))
        sa_key = ec.generate_private_key(ec.SECP256R1())
        self.sa_key = _write(directory / "sa.key", _key_pem(sa_key), private=True)
        self.sa_pub = _write(
            directory / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )

    @property
    def serving_ca_pem(self) -> bytes:
        """The serving CA certificate (what clients trust), PEM encoded."""
        return self._serving_ca.cert_pem

    def issue_client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPairFiles:
        """Mint a client certificate the apiserver accepts as ``user`` in ``groups``.

        Args:
            user: User name (certificate CN). Also used for the file names.
            groups: Group names (certificate O values).

        Returns:
            The written ``<user>.crt`` / ``<user>.key`` pair.
        """
        cert, key = self._client_ca.issue(user, organizations=groups)
        safe = user.replace(":", "_").replace("/", "_")
        return KeyPairFiles(
            cert=_write(self.directory / f"{safe}.crt", _cert_pem(cert)),
            key=_write(self.directory / f"{safe}.key", _key_pem(key), private=True),
        )

    def issue_serving(self, name: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> KeyPairFiles:
        """Mint a serving certificate signed by the serving CA (e.g. for a webhook server).

        The apiserver trusts it when the webhook's ``caBundle`` is :attr:`serving_ca_pem`.

        Args:
            name: CN and file name stem.
            hosts: DNS names and IP addresses for the SAN extension.

        Returns:
            The written ``<name>.crt`` / ``<name>.key`` pair.
        """
        cert, key = self._serving_ca.issue(name, server=True, hosts=hosts)
        return KeyPairFiles(
            cert=_write(self.directory / f"{name}.crt", _cert_pem(cert)),
            key=_write(self.directory / f"{name}.key", _key_pem(key), private=True),
        )
