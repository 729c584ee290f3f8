"""Which credential may go to which host, and keeping credentials out of everything we write.

Guarantees (all pure functions, no I/O):

* :class:`Secret` never shows its value in ``str``/``repr``/f-strings; only :meth:`Secret.reveal` does;
* :func:`auth_headers` gives the Hugging Face token only to a URL with the same origin (scheme, host, port)
  as the Hugging Face endpoint; URL user-info (``https://user:pass@host/``) only to that same origin; nothing to
  any other origin. The HTTP layer asks again for every hop of a redirect, so a redirect to another host
  carries no credential;
* :func:`sanitize_source` removes user-info and query strings (pre-signed URLs) from a source, so the marker,
  the result and the logs can name it;
* :func:`redact` replaces every known secret value in a text.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
REDACTED = "***"


class Secret:
    """A credential value that does not print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


Origin = tuple[str, str, int]


def origin(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an http(s) URL, lower-cased, default ports filled; ``None`` otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return (scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme])


@dataclass(frozen=True)
class HttpCredentials:
    """What an HTTP request may carry: a Hugging Face token scoped to the hub, user-info scoped to its URL."""

    hf_endpoint: str | None = None
    hf_token: Secret | None = None
    basic_origin: Origin | None = None
    basic_user: Secret | None = None
    basic_password: Secret | None = None


def auth_headers(url: str, creds: HttpCredentials) -> dict[str, str]:
    """The authentication headers a request to ``url`` may carry (possibly none)."""
    target = origin(url)
    if target is None:
        return {}
    if creds.hf_token is not None and creds.hf_endpoint and origin(creds.hf_endpoint) == target:
        return {"Authorization": f"Bearer {creds.hf_token.reveal()}"}
    if creds.basic_user is not None and creds.basic_origin == target:
        password = creds.basic_password.reveal() if creds.basic_password else ""
        token = base64.b64encode(f"{creds.basic_user.reveal()}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
    return {}


def split_userinfo(url: str) -> tuple[str, Secret | None, Secret | None]:
    """The URL without user-info, and the user and password it had."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = Secret(unquote(parts.username)) if parts.username is not None else None
    password = Secret(unquote(parts.password)) if parts.password is not None else None
    return clean, user, password


def sanitize_source(source: str) -> str:
    """The source as it may be written down: no user-info, no query string, no fragment."""
    if "://" not in source:
        return source
    scheme, _, rest = source.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = authority.rsplit("@", 1)[1]
    path, _, _ = path.partition("#")
    path, query_mark, _ = path.partition("?")
    if not slash:
        authority, _, _ = authority.partition("#")
        authority, query_mark2, _ = authority.partition("?")
        query_mark = query_mark or query_mark2
    suffix = "?" + REDACTED if query_mark else ""
    return f"{scheme}://{authority}{slash}{path}{suffix}"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value (of at least 4 characters) replaced by ``***``."""
    for value in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
