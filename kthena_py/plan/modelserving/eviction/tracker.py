"""The disruption tracker: which eviction units were recently granted an eviction, as Kthena records them.

The tracker is ConfigMap ``kthena-eviction-tracker-<ms>`` in the ModelServing's namespace, with one data key,
``entries``: a JSON object mapping a *unit key* to ``{"expiresAt", "triggerPodUID", "triggerPodName"}``. Unit keys
are Kthena's (built and matched in :mod:`kthena_py.plan.modelserving.core.disruption`, re-exported here):

* ``ServingGroup/<namespace>/<ms>/<group>`` for a ServingGroup (``<group>`` is its name, ``<ms>-<ordinal>``);
* ``Role/<namespace>/<ms>/<group>/<role>/<roleID>`` for one role instance (``<roleID>`` is ``<role>-<ordinal>``).

Guarantees:

* Pure and total: a missing ConfigMap, a missing or malformed ``entries`` value, or a malformed entry never
  raises; what cannot be read is ignored (an unreadable entry protects nothing).
* :func:`render_entries` is deterministic (sorted keys, timestamps to the millisecond, UTC ``Z``) and
  :func:`parse_entries` reads back what it writes, as well as Go's ``time.Time`` JSON (nanoseconds, offsets).
* An entry is *unexpired* while ``now < expiresAt``. :func:`disrupted_units` is the set of unexpired keys, the
  one view rollout and eviction share: a unit in it is unavailable, whatever its pods look like.
* :func:`prune` drops expired entries and the entries whose unit has *recovered*: it is healthy (complete, every
  pod Running and Ready, none terminating) and none of its pods is one whose eviction the entry records. An entry
  records every pod granted an eviction in its unit (``grantedPodUIDs``, a field of ours that Kthena's decoder
  ignores; written only when it names more than the trigger pod, so a one-pod entry is exactly Kthena's), so a
  pod granted while its unit was already disrupted keeps the unit disrupted until that pod is gone too.
* A grant is acted on by the API server after the webhook answered, on whichever pod has the name by then (an
  admission webhook cannot pin the UID): an entry is therefore *held* (``heldUntil``, ours) until the API server
  can no longer act on its latest grant, and only then may a view show whether the unit recovered.
* A release is only as good as the view it is computed on: a view older than a grant can show the unit healthy
  before the granted pod was even created. Callers therefore prune (beyond expiry, :func:`expire`) only on pods
  listed from the API server *after* reading the tracker they write back with its ``resourceVersion``; that view
  holds every grant the tracker records, and the write fails if a grant was added meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.plan.modelserving.core.disruption import GROUP_PREFIX, ROLE_PREFIX, group_key, role_key, unit_disrupted
from kthena_py.vocab.owners import controller_uid
from kthena_py.vocab.times import format_time, parse_time

__all__ = [
    "ENTRIES_KEY",
    "GROUP_PREFIX",
    "ROLE_PREFIX",
    "TRACKER_PREFIX",
    "PodIdentity",
    "TrackerEntry",
    "UnitHealth",
    "disrupted_units",
    "expire",
    "format_expiry",
    "group_key",
    "next_expiry",
    "parse_entries",
    "parse_expiry",
    "prune",
    "render_entries",
    "role_key",
    "tracker_entries",
    "tracker_name",
    "unit_disrupted",
]

TRACKER_PREFIX = "kthena-eviction-tracker-"
ENTRIES_KEY = "entries"


def tracker_name(ms: str) -> str:
    """The tracker ConfigMap's name for ModelServing ``ms``."""
    return f"{TRACKER_PREFIX}{ms}"


@dataclass(frozen=True)
class TrackerEntry:
    """One unit's granted disruption: unavailable until ``expires_at`` (epoch seconds) at the latest.

    ``trigger_pod_uid``/``trigger_pod_name`` name the pod whose eviction opened the entry (Kthena's fields);
    ``granted_uids`` every pod of the unit granted an eviction since, the trigger pod first; ``held_until`` the
    time before which the entry is never released, because the API server may still act on its latest grant.
    """

    expires_at: float
    trigger_pod_uid: str
    trigger_pod_name: str
    granted_uids: tuple[str, ...] = ()
    held_until: float | None = None

    @property
    def granted(self) -> frozenset[str]:
        """The UIDs of every pod granted an eviction in this entry (the trigger pod's included)."""
        return frozenset((self.trigger_pod_uid, *self.granted_uids)) - {""}

    def with_grant(self, uid: str, expires_at: float, held_until: float | None = None) -> TrackerEntry:
        """This entry after one more grant in its unit.

        ``uid`` is recorded (unless empty: a pod that was not found); the expiry and the hold move to
        ``expires_at`` and ``held_until``, never back.
        """
        uids = self.granted_uids or (self.trigger_pod_uid,)
        if uid and uid not in uids:
            uids = (*uids, uid)
        if set(uids) <= {self.trigger_pod_uid}:
            uids = ()  # only the trigger pod: Kthena's form
        holds = [h for h in (self.held_until, held_until) if h is not None]
        expiry = max(self.expires_at, expires_at)
        return TrackerEntry(expiry, self.trigger_pod_uid, self.trigger_pod_name, uids, max(holds, default=None))


@dataclass(frozen=True)
class PodIdentity:
    """One observed pod of a unit."""

    name: str
    uid: str


@dataclass(frozen=True)
class UnitHealth:
    """What :func:`prune` needs to know of an observed unit."""

    healthy: bool
    """Complete, every pod Running and Ready, none terminating (the tracker not considered)."""
    pods: tuple[PodIdentity, ...] = ()

    def recovered(self, entry: TrackerEntry) -> bool:
        """Whether this unit is healthy again without any pod whose eviction ``entry`` records."""
        granted = entry.granted
        return self.healthy and not any(pod.uid in granted for pod in self.pods)


def format_expiry(when: float) -> str:
    """Render epoch seconds as an RFC 3339 UTC timestamp with milliseconds (``2026-01-02T03:04:05.678Z``)."""
    return format_time(when, "milliseconds")


def parse_expiry(value: Any) -> float | None:
    """Parse an RFC 3339 timestamp (any fraction length, ``Z`` or an offset) into epoch seconds, else ``None``."""
    return parse_time(value)


def parse_entries(text: Any) -> dict[str, TrackerEntry]:
    """Read the ``entries`` JSON of a tracker (anything unreadable is left out)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    entries: dict[str, TrackerEntry] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, dict):
            continue
        expires = parse_expiry(value.get("expiresAt"))
        if expires is None:
            continue
        uid, name, granted = value.get("triggerPodUID"), value.get("triggerPodName"), value.get("grantedPodUIDs")
        uids = tuple(u for u in granted if isinstance(u, str) and u) if isinstance(granted, list) else ()
        entries[key] = TrackerEntry(
            expires,
            uid if isinstance(uid, str) else "",
            name if isinstance(name, str) else "",
            uids,
            parse_expiry(value.get("heldUntil")),
        )
    return entries


def tracker_entries(tracker: Mapping[str, Any] | None, owner_uid: str | None = None) -> dict[str, TrackerEntry]:
    """The entries of a tracker ConfigMap object (``None``: no tracker, no entries).

    Args:
        tracker: The ConfigMap.
        owner_uid: The UID of the ModelServing reading it: a tracker controlled by another UID (left by a deleted
            ModelServing of the same name) has no entries for it. ``None``: not checked.
    """
    if not tracker:
        return {}
    if owner_uid is not None and controller_uid(tracker) not in (None, owner_uid):
        return {}
    data = tracker.get("data")
    return parse_entries(data.get(ENTRIES_KEY) if isinstance(data, Mapping) else None)


def render_entries(entries: Mapping[str, TrackerEntry]) -> str:
    """The ``entries`` JSON for ``entries`` (deterministic)."""
    body: dict[str, dict[str, str | list[str]]] = {}
    for key, entry in sorted(entries.items()):
        item: dict[str, str | list[str]] = {
            "expiresAt": format_expiry(entry.expires_at),
            "triggerPodUID": entry.trigger_pod_uid,
            "triggerPodName": entry.trigger_pod_name,
        }
        if entry.granted - {entry.trigger_pod_uid}:
            item["grantedPodUIDs"] = list(entry.granted_uids)
        if entry.held_until is not None:
            item["heldUntil"] = format_expiry(entry.held_until)
        body[key] = item
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def disrupted_units(tracker: Mapping[str, Any] | None, now: float, owner_uid: str | None = None) -> frozenset[str]:
    """The unit keys a tracker records as disrupted at ``now``: its unexpired entries.

    This is the one unavailability budget rollout and eviction share. A planner that takes units down (a rolling
    update) must count every unit in this set as unavailable, and the eviction webhook counts units a rollout
    took down as unavailable because their pods are not ready. A key of one level also covers the other: see
    :func:`unit_disrupted`.

    Args:
        tracker: The tracker ConfigMap object as read from the cluster or the cache (``None``: none exists).
        now: The current time, epoch seconds.
        owner_uid: The reading ModelServing's UID (a tracker another UID controls records nothing for it).

    Returns:
        Keys in Kthena's format, ``ServingGroup/<ns>/<ms>/<group>`` and ``Role/<ns>/<ms>/<group>/<role>/<roleID>``.
    """
    return frozenset(key for key, entry in tracker_entries(tracker, owner_uid).items() if now < entry.expires_at)


def expire(entries: Mapping[str, TrackerEntry], now: float) -> dict[str, TrackerEntry]:
    """Drop the expired entries (safe on any view: it needs none)."""
    return {key: entry for key, entry in entries.items() if now < entry.expires_at}


def prune(entries: Mapping[str, TrackerEntry], units: Mapping[str, UnitHealth], now: float) -> dict[str, TrackerEntry]:
    """Drop the entries that no longer protect anything.

    Args:
        entries: The tracker's entries.
        units: The observed units by key (ServingGroups and role instances alike), from pods listed after the
            tracker was read (see the module docstring).
        now: The current time, epoch seconds.

    Returns:
        The entries that are unexpired and either still held (``now < held_until``) or whose unit has not
        recovered (:meth:`UnitHealth.recovered`). A unit that is not observed keeps its entry until it expires.
    """
    return {
        key: entry
        for key, entry in expire(entries, now).items()
        if (entry.held_until is not None and now < entry.held_until)
        or (unit := units.get(key)) is None
        or not unit.recovered(entry)
    }


def next_expiry(entries: Mapping[str, TrackerEntry], now: float | None = None) -> float | None:
    """The earliest time an entry of ``entries`` can end: its expiry, or the end of its hold after ``now``.

    Args:
        entries: The entries.
        now: The current time; holds that end later than it count (``None``: expiries only).

    Returns:
        The time, or ``None`` when ``entries`` is empty.
    """
    times = [entry.expires_at for entry in entries.values()]
    if now is not None:
        times += [e.held_until for e in entries.values() if e.held_until is not None and e.held_until > now]
    return min(times, default=None)
