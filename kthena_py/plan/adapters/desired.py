"""The desired adapter set of a ModelServing, read from its ``serving.kthena-py.io/lora-adapters`` annotation.

Guarantees:

* :func:`parse_adapters` reads a JSON list of objects ``{"name", "source"}`` (``url`` is accepted for ``source``,
  KubeAI's spelling; giving both with different values is an error). Every problem is returned with its path
  (``[1].name``), nothing raises, and an entry with a problem is left out of the result.
* A name is a label-key name part (at most 63 characters, alphanumeric at both ends, ``-``, ``_`` and ``.``
  inside), so it can be the pod label ``adapter.kthena-py.io/<name>``; names are unique in a set.
* A source is a non-empty string without whitespace.
* :func:`source_digest` is the value of the pod label: the first 16 hex digits of the source's sha256, so a source
  that changes under the same name is told apart (and reloaded).
* :func:`adapters_of` is the tolerant read for consumers (the activator, ``kthena-py status``): the valid entries
  of a ModelServing's annotation, in order; admission refuses the invalid ones before they get there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.vocab.labels import ADAPTER_LABEL_PREFIX, LORA_ADAPTERS

__all__ = ["Adapter", "AdapterProblem", "adapter_label", "adapters_of", "parse_adapters", "source_digest"]

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def source_digest(source: str) -> str:
    """The label value recording which source was loaded (16 hex digits of its sha256)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def adapter_label(name: str) -> str:
    """The pod label key of a loaded adapter: ``adapter.kthena-py.io/<name>``."""
    return ADAPTER_LABEL_PREFIX + name


@dataclass(frozen=True)
class Adapter:
    """One adapter every Ready entry pod should have loaded."""

    name: str
    source: str

    @property
    def label(self) -> str:
        """Its pod label key."""
        return adapter_label(self.name)

    @property
    def digest(self) -> str:
        """Its pod label value."""
        return source_digest(self.source)


@dataclass(frozen=True)
class AdapterProblem:
    """Why an entry (or the whole annotation) cannot be used; ``path`` is relative to the annotation's value."""

    path: str
    message: str


def _entry(index: int, raw: Any, seen: set[str]) -> Adapter | list[AdapterProblem]:
    at = f"[{index}]"
    if not isinstance(raw, Mapping):
        return [AdapterProblem(at, "must be an object with a name and a source")]
    problems: list[AdapterProblem] = []
    unknown = sorted(str(k) for k in raw if k not in ("name", "source", "url"))
    if unknown:
        problems.append(AdapterProblem(at, f"unknown fields: {', '.join(unknown)} (allowed: name, source, url)"))
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(
            AdapterProblem(
                f"{at}.name",
                f"{name!r} is not a valid adapter name: at most 63 characters, letters and digits at both ends, "
                "'-', '_' and '.' inside",
            )
        )
    elif name in seen:
        problems.append(AdapterProblem(f"{at}.name", f"{name!r} is listed twice"))
    source, url = raw.get("source"), raw.get("url")
    if source is not None and url is not None and source != url:
        problems.append(AdapterProblem(f"{at}.url", "give source or url (the same thing), not two different values"))
    chosen = source if source is not None else url
    if not isinstance(chosen, str) or not chosen or any(c.isspace() for c in chosen):
        problems.append(AdapterProblem(f"{at}.source", "must be a non-empty string without whitespace"))
    if problems:
        return problems
    assert isinstance(name, str) and isinstance(chosen, str)
    seen.add(name)
    return Adapter(name, chosen)


def parse_adapters(text: str | None) -> tuple[tuple[Adapter, ...], tuple[AdapterProblem, ...]]:
    """The valid adapters of an annotation value and the problems of the rest (see the module docstring)."""
    if text is None or not text.strip():
        return (), ()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return (), (AdapterProblem("", f"not JSON: {exc}"),)
    if not isinstance(raw, list):
        return (), (AdapterProblem("", 'must be a JSON list of {"name": ..., "source": ...}'),)
    found: list[Adapter] = []
    problems: list[AdapterProblem] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        parsed = _entry(index, entry, seen)
        if isinstance(parsed, Adapter):
            found.append(parsed)
        else:
            problems.extend(parsed)
    return tuple(found), tuple(problems)


def adapters_of(ms: Mapping[str, Any]) -> tuple[Adapter, ...]:
    """The valid adapters a ModelServing asks for (its annotation; none when absent)."""
    metadata = ms.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    raw = annotations.get(LORA_ADAPTERS) if isinstance(annotations, Mapping) else None
    return parse_adapters(raw if isinstance(raw, str) else None)[0]
