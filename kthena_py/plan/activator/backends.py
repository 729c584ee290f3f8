"""Which entry pods can take a request, and which one takes the next.

Guarantees:

* A backend is an entry pod (label ``modelserving.volcano.sh/entry: "true"``) of the target that is Running and
  Ready, not terminating, and has a pod IP; the port is the target's.
* :func:`entry_backends` with ``labelled=(key, value)`` keeps only the pods whose label ``key`` is ``value`` (an
  adapter's pods: ``adapter.kthena-py.io/<name>`` equal to the digest of the source wanted).
* :func:`choose_backend` picks the backend with the fewest requests in flight; ties go to the first by pod name,
  so equal inputs always pick the same pod. ``exclude`` (pods that just refused a request) are skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.vocab.labels import ENTRY_VALUE, SERVING_ENTRY
from kthena_py.vocab.pods import is_terminating, running_and_ready

__all__ = ["Backend", "choose_backend", "entry_backends"]


@dataclass(frozen=True, order=True)
class Backend:
    """One entry pod to send requests to."""

    pod: str
    ip: str
    port: int

    @property
    def url(self) -> str:
        """``http://ip:port``."""
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"http://{host}:{self.port}"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def entry_backends(
    pods: Iterable[Mapping[str, Any]], port: int, labelled: tuple[str, str] | None = None
) -> list[Backend]:
    """The Ready entry pods of ``pods`` (with label ``labelled`` when given) as backends on ``port``, by pod name."""
    found: list[Backend] = []
    for pod in pods:
        md = _dict(pod.get("metadata"))
        labels = _dict(md.get("labels"))
        if labels.get(SERVING_ENTRY) != ENTRY_VALUE or is_terminating(pod):
            continue
        if labelled is not None and labels.get(labelled[0]) != labelled[1]:
            continue
        ip = _dict(pod.get("status")).get("podIP")
        if not ip or not running_and_ready(pod):
            continue
        found.append(Backend(str(md.get("name") or ""), str(ip), port))
    return sorted(found)


def choose_backend(
    backends: Iterable[Backend], in_flight: Mapping[str, int], exclude: Collection[str] = ()
) -> Backend | None:
    """The backend with the fewest requests in flight (by pod name), first by name on a tie; ``None`` if none."""
    usable = [b for b in backends if b.pod not in exclude]
    if not usable:
        return None
    return min(usable, key=lambda b: (in_flight.get(b.pod, 0), b.pod))
