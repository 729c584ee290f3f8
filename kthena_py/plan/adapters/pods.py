"""What the adapter reconciler reads of an entry pod: readiness, restarts, loaded adapters, loads under way.

Guarantees:

* Pure reads of a pod object; nothing raises on a malformed value: an unreadable ``lora-loading`` annotation
  counts as no load under way, an unreadable ``lora-restarts`` as never recorded.
* :func:`pod_view` returns ``None`` for a pod that is not an entry pod (only entry pods serve, so only they get
  adapters); a terminating entry pod is not ready.
* ``labels`` maps adapter name to the source digest of its ``adapter.kthena-py.io/<name>`` label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kthena_py.vocab.labels import (
    ADAPTER_LABEL_PREFIX,
    ENTRY_VALUE,
    LORA_LOADING,
    LORA_RESTARTS,
    SERVING_ENTRY,
)
from kthena_py.vocab.pods import is_terminating, running_and_ready

__all__ = ["LoadIntent", "PodView", "format_intents", "parse_intents", "pod_view", "restart_total"]


@dataclass(frozen=True)
class LoadIntent:
    """A load the reconciler started on a pod: which source (digest), when (epoch seconds), by which process.

    ``owner`` is the identity of the manager process that wrote it (``""`` in an intent written before owners were
    recorded: treated as another process's).
    """

    digest: str
    since: float
    owner: str = ""


@dataclass(frozen=True)
class PodView:
    """An entry pod as the planner sees it."""

    name: str
    uid: str = ""
    ip: str = ""
    ready: bool = False
    restarts: int = 0
    recorded_restarts: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    intents: Mapping[str, LoadIntent] = field(default_factory=dict)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def restart_total(pod: Mapping[str, Any]) -> int:
    """The sum of the restart counts of a pod's containers."""
    statuses = _dict(pod.get("status")).get("containerStatuses")
    total = 0
    for status in statuses if isinstance(statuses, list) else []:
        count = _dict(status).get("restartCount")
        total += count if isinstance(count, int) else 0
    return total


def parse_intents(text: str | None) -> dict[str, LoadIntent]:
    """The loads under way recorded in a ``lora-loading`` annotation (unreadable entries are left out)."""
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    found: dict[str, LoadIntent] = {}
    for name, entry in _dict(raw).items():
        digest, since = _dict(entry).get("digest"), _dict(entry).get("since")
        owner = _dict(entry).get("owner")
        if isinstance(digest, str) and isinstance(since, (int, float)) and not isinstance(since, bool):
            found[str(name)] = LoadIntent(digest, float(since), owner if isinstance(owner, str) else "")
    return found


def format_intents(intents: Mapping[str, LoadIntent]) -> str | None:
    """The annotation value of ``intents`` (``None``: remove the annotation)."""
    if not intents:
        return None
    body = {
        name: {"digest": i.digest, "since": round(i.since, 3)} | ({"owner": i.owner} if i.owner else {})
        for name, i in sorted(intents.items())
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def pod_view(pod: Mapping[str, Any]) -> PodView | None:
    """The planner's view of an entry pod, ``None`` for any other pod."""
    md = _dict(pod.get("metadata"))
    labels = {str(k): str(v) for k, v in _dict(md.get("labels")).items()}
    if labels.get(SERVING_ENTRY) != ENTRY_VALUE:
        return None
    annotations = _dict(md.get("annotations"))
    recorded_text = str(annotations.get(LORA_RESTARTS) or "").strip()
    ip = str(_dict(pod.get("status")).get("podIP") or "")
    return PodView(
        name=str(md.get("name") or ""),
        uid=str(md.get("uid") or ""),
        ip=ip,
        ready=bool(ip) and running_and_ready(pod) and not is_terminating(pod),
        restarts=restart_total(pod),
        recorded_restarts=int(recorded_text) if recorded_text.isdigit() else None,
        labels={k[len(ADAPTER_LABEL_PREFIX) :]: v for k, v in labels.items() if k.startswith(ADAPTER_LABEL_PREFIX)},
        intents=parse_intents(str(annotations.get(LORA_LOADING) or "")),
    )
