"""The downloader's settings, resolved the way Kthena's downloader resolves them.

Guarantees (pure: the environment is passed in):

* ``-c/--config`` is a JSON object with any of the keys :data:`CONFIG_KEYS`; a value given there wins, the
  environment fills the gaps (Kthena's variables first, then the common fallbacks: ``HF_TOKEN``,
  ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``); empty strings count as unset;
* a ``--revision`` flag wins over both for the source's revision;
* secrets come out wrapped in :class:`~kthena_py.download.credentials.Secret`; unknown keys are reported by
  name only, never with their values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from .credentials import Secret
from .result import DownloadError, Reason

CONFIG_KEYS = (
    "hf_token",
    "hf_endpoint",
    "hf_revision",
    "ms_token",
    "ms_revision",
    "access_key",
    "secret_key",
    "endpoint",
)

ENV_NAMES: dict[str, tuple[str, ...]] = {
    "hf_token": ("HF_AUTH_TOKEN", "HF_TOKEN"),
    "hf_endpoint": ("HF_ENDPOINT",),
    "hf_revision": ("HF_REVISION",),
    "ms_token": ("MS_TOKEN",),
    "ms_revision": ("MS_REVISION",),
    "access_key": ("ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
    "secret_key": ("SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
    "endpoint": ("ENDPOINT", "AWS_ENDPOINT_URL"),
}

SECRET_KEYS = frozenset({"hf_token", "ms_token", "access_key", "secret_key"})
DEFAULT_HF_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class Settings:
    """Endpoints, revisions and credentials for one run."""

    hf_token: Secret | None = None
    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    hf_revision: str | None = None
    ms_token: Secret | None = None
    ms_revision: str | None = None
    access_key: Secret | None = None
    secret_key: Secret | None = None
    endpoint: str | None = None
    unknown_keys: tuple[str, ...] = ()

    def secret_values(self) -> list[str]:
        """Every secret value, for redaction."""
        return [s.reveal() for s in (self.hf_token, self.ms_token, self.access_key, self.secret_key) if s]


def parse_config(text: str | None) -> dict[str, str]:
    """The ``-c/--config`` JSON object as strings (empty values dropped).

    Raises:
        DownloadError: Not a JSON object of strings (``InvalidArguments``; the text is not echoed).
    """
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DownloadError(Reason.INVALID_ARGUMENTS, f"--config is not valid JSON (at position {exc.pos})") from None
    if not isinstance(doc, dict):
        raise DownloadError(Reason.INVALID_ARGUMENTS, "--config must be a JSON object")
    out: dict[str, str] = {}
    for key, value in doc.items():
        if value is None or value == "":
            continue
        if not isinstance(value, str | int | float):
            raise DownloadError(Reason.INVALID_ARGUMENTS, f"--config key {key!r} must be a string")
        out[str(key)] = str(value)
    return out


def resolve_settings(config: Mapping[str, str], env: Mapping[str, str], revision: str | None = None) -> Settings:
    """Merge the ``--config`` values, the environment and ``--revision`` (see the module docstring)."""
    values: dict[str, str] = {}
    for key in CONFIG_KEYS:
        if config.get(key):
            values[key] = config[key]
            continue
        for name in ENV_NAMES[key]:
            if env.get(name):
                values[key] = env[name]
                break
    if revision:
        values["hf_revision"] = revision
        values["ms_revision"] = revision

    def secret(key: str) -> Secret | None:
        return Secret(values[key]) if key in values else None

    return Settings(
        hf_token=secret("hf_token"),
        hf_endpoint=values.get("hf_endpoint", DEFAULT_HF_ENDPOINT).rstrip("/"),
        hf_revision=values.get("hf_revision"),
        ms_token=secret("ms_token"),
        ms_revision=values.get("ms_revision"),
        access_key=secret("access_key"),
        secret_key=secret("secret_key"),
        endpoint=values.get("endpoint"),
        unknown_keys=tuple(sorted(k for k in config if k not in CONFIG_KEYS)),
    )
