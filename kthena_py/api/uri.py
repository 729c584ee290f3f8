"""OpenAPI ``format: uri``, checked exactly as the Kubernetes API server checks it.

The API server validates ``format: uri`` in a CRD schema with kube-openapi's ``strfmt`` registry, which (in
Kubernetes 1.35, kube-openapi 2025-09) calls ``govalidator.IsRequestURI``: a string is a URI when Go's
``url.ParseRequestURI`` parses it. There is no hostname fallback: ``prometheus.monitoring.svc`` is refused,
while ``prometheus:9090`` is accepted (the scheme ``prometheus`` with the opaque part ``9090``).

Guarantees:

* :func:`uri_error` returns ``None`` exactly when Go 1.26's ``url.ParseRequestURI`` accepts the string, else a
  short reason worded after Go's error (``invalid port ":abc" after host``, ``invalid URL escape "%zz"``, ...).
  Accepted: an absolute URI (``scheme:`` then anything without control characters; ``scheme://authority/...``
  with a well-formed authority), an absolute path (``/...``) and ``*``. Refused: the empty string, control
  characters (U+0000-U+001F, U+007F) anywhere, a leading ``:``, relative references, bad percent-escapes in the
  authority or path (the query and an opaque part are not checked), characters a host may not hold, a port that
  is not all digits, unbalanced or misplaced ``[``, a bracketed literal that is not an IPv6 address, userinfo
  with characters outside RFC 3986's set.
* Colons in an ``http``/``https`` host outside brackets (``http://host:1:2``, ``http://::1/``) are refused, as
  with Go 1.26's default ``urlstrictcolons=1`` (the envtest API server); an API server built with an older Go
  or ``GODEBUG=urlstrictcolons=0`` (for instance an official v1.35 build, whose go.mod pins ``go1.25``
  GODEBUG defaults) accepts them. Other schemes may hold several colons (``mongodb://a:1,b:2``).
* Pure and total: no I/O, never raises for any ``str``.
"""

from __future__ import annotations

__all__ = ["URI_FORMAT", "is_uri", "uri_error"]

#: What a valid value is, for error messages.
URI_FORMAT = "must be a URI (an absolute URI or an absolute path)"

_HEX = frozenset("0123456789abcdefABCDEF")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# ASCII characters Go's net/url lets stand unescaped in a host (and in an IPv6 zone): RFC 3986 unreserved and
# sub-delims, plus ':' (port), '[' ']' (IP literals) and '<' '>' '"'.
_HOST_CHARS = _ALNUM | frozenset("-_.~!$&'()*+,;=:[]<>\"")
# Characters Go's net/url accepts in userinfo: RFC 3986 unreserved, sub-delims, ':', '%' and '@'.
_USERINFO_CHARS = _ALNUM | frozenset("-._~!$&'()*+,;=:%@")
_STRICT_COLON_SCHEMES = frozenset({"http", "https"})


def is_uri(text: str) -> bool:
    """Whether the API server accepts ``text`` for a ``format: uri`` string (see :func:`uri_error`)."""
    return uri_error(text) is None


def uri_error(text: str) -> str | None:
    """Check ``text`` the way Go's ``url.ParseRequestURI`` does.

    Args:
        text: The candidate URI.

    Returns:
        ``None`` when the API server accepts it, else why not, e.g. ``invalid port ":abc" after host``.
    """
    for char in text:
        if char < " " or char == "\x7f":
            return f"invalid control character {_quote(char)}"
    if not text:
        return "empty URI"
    if text == "*":
        return None
    scheme, rest, error = _split_scheme(text)
    if error:
        return error
    rest = rest.split("?", 1)[0]  # the query is kept verbatim
    if not rest.startswith("/"):
        # "scheme:opaque" is taken as is; without a scheme only an absolute path is a request URI.
        return None if scheme else "neither an absolute URI (scheme:...) nor an absolute path (/...)"
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        error = _authority_error(scheme.lower(), authority)
        if error:
            return error
        rest = slash + path
    return _escape_error(rest)


def _split_scheme(text: str) -> tuple[str, str, str | None]:
    """Split ``scheme:rest`` when ``text`` starts with ``[A-Za-z][A-Za-z0-9+.-]*:``; else the scheme is empty."""
    for index, char in enumerate(text):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if index == 0:
                return "", text, None
            continue
        if char == ":":
            if index == 0:
                return "", "", "missing protocol scheme"
            return text[:index], text[index + 1 :], None
        return "", text, None
    return "", text, None


def _escape_error(text: str) -> str | None:
    """Percent-escapes of a path or userinfo: every ``%`` must start ``%XX`` with two hex digits."""
    index = text.find("%")
    while index >= 0:
        if index + 2 >= len(text) or text[index + 1] not in _HEX or text[index + 2] not in _HEX:
            return f"invalid URL escape {_quote(text[index : index + 3])}"
        index = text.find("%", index + 3)
    return None


def _authority_error(scheme: str, authority: str) -> str | None:
    user, at, host = authority.rpartition("@")
    error = _host_error(scheme, host)
    if error or not at:
        return error
    if any(char not in _USERINFO_CHARS for char in user):
        return "invalid userinfo"
    return _escape_error(user)


def _valid_port(colon_port: str) -> bool:
    """``""`` or ``:`` followed by ASCII digits only (possibly none)."""
    return colon_port == "" or (colon_port[0] == ":" and all("0" <= char <= "9" for char in colon_port[1:]))


def _host_error(scheme: str, host: str) -> str | None:
    bracket = host.rfind("[")
    if bracket > 0:
        return "invalid IP-literal"
    if bracket == 0:
        close = host.rfind("]")
        if close < 0:
            return "missing ']' in host"
        colon_port = host[close + 1 :]
        if not _valid_port(colon_port):
            return f"invalid port {_quote(colon_port)} after host"
        return _ip_literal_error(host[1:close])
    first = host.find(":")
    if first >= 0:
        last = host.rfind(":")
        colon = first if scheme in _STRICT_COLON_SCHEMES else last
        if not _valid_port(host[colon:]):
            return f"invalid port {_quote(host[colon:])} after host"
    _, error = _unescape_host(host, zone=False)
    return error


def _unescape_host(text: str, *, zone: bool) -> tuple[str, str | None]:
    """Decode the percent-escapes of a host (or of an IPv6 zone) and check its characters.

    In a host, ``%XX`` may only encode a non-ASCII byte, or be ``%25``; in a zone it may encode a space, ``%`` or
    a byte a host may hold. Decoded bytes become the code points U+0000-U+00FF.
    """
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            escape = text[index : index + 3]
            if index + 2 >= len(text) or text[index + 1] not in _HEX or text[index + 2] not in _HEX:
                return "", f"invalid URL escape {_quote(escape)}"
            byte = int(text[index + 1 : index + 3], 16)
            if escape != "%25":
                if not zone and byte < 0x80:
                    return "", f"invalid URL escape {_quote(escape)}"
                if zone and byte != 0x20 and chr(byte) not in _HOST_CHARS:
                    return "", f"invalid URL escape {_quote(escape)}"
            out.append(chr(byte))
            index += 3
            continue
        if char.isascii() and char not in _HOST_CHARS:
            return "", f"invalid character {_quote(char)} in host name"
        out.append(char)
        index += 1
    return "".join(out), None


def _ip_literal_error(literal: str) -> str | None:
    """The inside of ``[...]``: an IPv6 address, optionally with a ``%25``-introduced zone (RFC 6874)."""
    zone_at = literal.find("%25")
    if zone_at >= 0:
        address, error = _unescape_host(literal[:zone_at], zone=False)
        if error:
            return error
        zone, error = _unescape_host(literal[zone_at:], zone=True)
        if error:
            return error
        address += zone
    else:
        address, error = _unescape_host(literal, zone=False)
        if error:
            return error
    for char in address:  # Go's netip.ParseAddr picks the family by the first '.', ':' or '%'
        if char == ":":
            error = _ipv6_error(address)
            return f"invalid host: {error}" if error else None
        if char == ".":
            return "invalid IP-literal" if _ipv4_error(address) is None else "invalid host: not an IP address"
        if char == "%":
            return "invalid host: missing IPv6 address"
    return "invalid host: not an IP address"


def _ipv4_error(text: str) -> str | None:
    """Dotted decimal, exactly four fields, each 0-255 without a leading zero."""
    fields = text.split(".")
    if len(fields) != 4:
        return "IPv4 address must have four fields"
    for part in fields:
        if not part or not all("0" <= char <= "9" for char in part):
            return "IPv4 field must be decimal digits"
        if len(part) > 1 and part[0] == "0":
            return "IPv4 field has octet with leading zero"
        if int(part) > 255:
            return "IPv4 field has value >255"
    return None


def _ipv6_error(text: str) -> str | None:
    """RFC 4291 text form (as Go's ``netip`` reads it): hex groups of 1-4 digits, one ``::``, a final IPv4.

    An optional ``%zone`` suffix must be non-empty.
    """
    address, percent, zone = text.partition("%")
    if percent and not zone:
        return "zone must be a non-empty string"
    if address.startswith("::"):
        head, tail = [], address[2:]
        compressed = True
    elif "::" in address:
        before, _, tail = address.partition("::")
        head, compressed = before.split(":"), True
    else:
        head, tail, compressed = address.split(":"), "", False
    rest = tail.split(":") if tail else []
    if compressed and "::" in tail:
        return "multiple :: in address"
    groups = head + rest
    bytes_used = 0
    ends_with_group = bool(rest) or not compressed  # else the address ends with "::"
    for position, group in enumerate(groups):
        last = ends_with_group and position == len(groups) - 1
        if last and "." in group:
            if _ipv4_error(group) is not None:
                return "invalid embedded IPv4 address"
            bytes_used += 4
            continue
        if not group or len(group) > 4 or any(char not in _HEX for char in group):
            return "each colon-separated field must have 1 to 4 hex digits"
        bytes_used += 2
    if compressed:
        return None if bytes_used < 16 else "the :: must expand to at least one field of zeros"
    return None if bytes_used == 16 else "address must have eight fields"


def _quote(text: str) -> str:
    r"""Quote like Go's ``%q`` for the short fragments quoted here (control characters as ``\t``, ``\x7f``, ...)."""
    parts = []
    for char in text:
        if char in '"\\':
            parts.append("\\" + char)
        elif char < " " or char == "\x7f":
            parts.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(char, f"\\x{ord(char):02x}"))
        else:
            parts.append(char)
    return '"' + "".join(parts) + '"'
