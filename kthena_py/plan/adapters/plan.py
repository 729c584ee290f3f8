"""What to do on one entry pod so that it holds the desired adapter set: load, unload, label, wait or back off.

The state lives on the pod (labels ``adapter.kthena-py.io/<name>`` = source digest, the restart count they were
written at, the loads under way); the engine's own list of loaded adapters (``/v1/models``, the *inventory*) is
read only when something would be loaded. Failures and their backoff are the reconciler's memory.

Guarantees (:func:`plan_pod`, pure: the clock is an argument):

* **Only Ready pods get loads and unloads.** A pod that is not Ready gets no engine call; its labels stay unless
  they are stale.
* **A restart invalidates the labels**: when the pod's restart count differs from the one recorded with its labels,
  every adapter label and load under way is dropped (the engine lost them) and the count is recorded again; the
  set is loaded afresh once the pod is Ready.
* **Loaded means labelled with the desired source's digest.** A label whose name left the set, or whose digest is
  not the desired source's, is unloaded (then its label removed); a changed source is unloaded, then loaded.
* **Never loaded twice**: an adapter the inventory lists with the expected root is labelled without a load
  (*adopted*: a load whose label write was lost, e.g. the manager was killed). A load recorded as under way (an
  *intent*: digest, time written, writer) is *in doubt* until it resolves (:func:`intent_state`): the inventory
  lists it (*landed*), or it is *lost*: an intent this process (``me``) wrote, ``load_timeout`` after it was
  written (the request may still be running here); another process's intent (a manager that died), once the
  inventory does not list it ``intent_grace`` after it was written (a request sent just before the writer died
  shows up by then, unless the sidecar is still downloading: see docs/adapters.md); without an inventory, any
  intent after ``load_timeout``. An in-doubt load is waited for (re-probed every :data:`INTENT_POLL_SECONDS`),
  never re-sent, and a lost one is sent again. Loads need the inventory: without it (and not yet probed)
  :attr:`PodPlan.needs_inventory` is set and the plan must be made again with it; a probe that failed leaves the
  loads to go ahead (waits for loads in doubt hold).
* **An in-doubt load of a name (or source) that left the set is not left behind**: its intent stays until it
  resolves; a landed one is unloaded (the intent dropped when the unload succeeded, the reconciler's part), a lost
  one is dropped. A new source under that name waits for it. Adapters the engine lists that the reconciler has
  neither a label nor an intent for are not touched (they may be the engine's own, e.g. ``--lora-modules``).
* **Backoff**: an adapter whose last load of the same source failed is retried only at
  :meth:`Failure.retry_at` (:func:`retry_delay`: 1 s doubling up to 5 minutes); a new source starts afresh. An
  unload that failed (recorded with the digest of the label it removes) is held the same way, and so is the load of
  a new source under that name.
* :attr:`PodPlan.wake_at` is the earliest time the plan changes on its own (a retry, a wait's poll or expiry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .desired import Adapter
from .endpoint import LoadEndpoint, expected_root
from .pods import LoadIntent, PodView

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "INTENT_GRACE_SECONDS",
    "INTENT_POLL_SECONDS",
    "LOAD_TIMEOUT_SECONDS",
    "Failure",
    "IntentState",
    "PodPlan",
    "intent_state",
    "plan_pod",
    "retry_delay",
]

LOAD_TIMEOUT_SECONDS = 300.0
"""How long a load may take (the sidecar downloads first); a load under way for longer is given up and re-sent."""
INTENT_GRACE_SECONDS = 30.0
"""How long another process's load under way may stay unlisted by the engine before it counts as never sent."""
INTENT_POLL_SECONDS = 1.0
"""How often a load under way that this process did not send is looked for in the inventory."""
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 300.0


def retry_delay(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th consecutive failure: 1, 2, 4, ... up to 300."""
    if attempts <= 0:
        return 0.0
    return min(BACKOFF_BASE_SECONDS * 2.0 ** min(attempts - 1, 30), BACKOFF_CAP_SECONDS)


@dataclass(frozen=True)
class Failure:
    """The last failed load (or unload) of an adapter on a pod: of which source, how many in a row, when, why."""

    digest: str
    attempts: int
    at: float
    message: str

    @property
    def retry_at(self) -> float:
        """When the next attempt may go."""
        return self.at + retry_delay(self.attempts)


@dataclass(frozen=True)
class PodPlan:
    """The actions for one pod, in the order they run: unloads, then loads, then one patch of the pod."""

    pod: str
    ready: bool
    unloads: tuple[str, ...] = ()
    loads: tuple[Adapter, ...] = ()
    adopt: tuple[Adapter, ...] = ()
    drop_labels: tuple[str, ...] = ()
    drop_intents: tuple[str, ...] = ()
    stale: bool = False
    loaded: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    backing_off: tuple[str, ...] = ()
    needs_inventory: bool = False
    wake_at: float | None = None

    @property
    def complete(self) -> bool:
        """Ready, with every desired adapter loaded."""
        return self.ready and not self.missing

    @property
    def writes(self) -> bool:
        """Whether the pod's labels or annotations change without any engine call."""
        return bool(self.adopt or self.drop_labels or self.drop_intents or self.stale)


@dataclass(frozen=True)
class IntentState:
    """Where a load under way stands: ``landed`` (listed), ``lost`` (never to land) or ``doubt`` (until ``until``)."""

    state: Literal["landed", "lost", "doubt"]
    until: float | None = None


def intent_state(
    intent: LoadIntent,
    listed: bool | None,
    *,
    now: float,
    me: str,
    intent_grace: float,
    load_timeout: float,
) -> IntentState:
    """Resolve a load under way (see the module docstring); ``listed`` ``None``: the inventory is not known."""
    if listed:
        return IntentState("landed")
    mine = bool(me) and intent.owner == me
    window = load_timeout if mine or listed is None else min(intent_grace, load_timeout)
    until = intent.since + window
    return IntentState("doubt", until) if now < until else IntentState("lost")


def _earliest(*times: float | None) -> float | None:
    found = [t for t in times if t is not None]
    return min(found) if found else None


def plan_pod(
    desired: Sequence[Adapter],
    endpoint: LoadEndpoint,
    pod: PodView,
    *,
    now: float,
    failures: Mapping[str, Failure] | None = None,
    inventory: Mapping[str, str] | None = None,
    probed: bool = False,
    load_timeout: float = LOAD_TIMEOUT_SECONDS,
    intent_grace: float = INTENT_GRACE_SECONDS,
    me: str = "",
) -> PodPlan:
    """Plan one pod (see the module docstring).

    Args:
        desired: The adapter set.
        endpoint: Where loads go (decides the root an adapter is listed with).
        pod: The pod.
        now: The current time (epoch seconds).
        failures: The last failure per adapter name on this pod.
        inventory: The engine's loaded adapters (name -> root), when it was read.
        probed: The inventory was asked for (``inventory`` ``None`` then means the probe failed).
        load_timeout: How long a load under way is waited for.
        intent_grace: How long another process's load under way may stay unlisted before it is sent again.
        me: This process's identity (the owner of the intents it writes; ``""``: none is this process's).
    """
    failures = failures or {}
    stale = pod.recorded_restarts is not None and pod.recorded_restarts != pod.restarts
    labels = {} if stale else dict(pod.labels)
    intents = {} if stale else dict(pod.intents)
    drop_labels = sorted(pod.labels) if stale else []
    drop_intents = sorted(pod.intents) if stale else []
    wanted = {a.name: a for a in desired}
    orphans = {n: i for n, i in intents.items() if n not in wanted or i.digest != wanted[n].digest}
    if not pod.ready:
        missing = tuple(a.name for a in desired)
        return PodPlan(
            pod.name,
            False,
            drop_labels=tuple(drop_labels),
            drop_intents=tuple(drop_intents),
            stale=stale,
            missing=missing,
        )
    unloads = [name for name in sorted(labels) if name not in wanted or labels[name] != wanted[name].digest]
    loads: list[Adapter] = []
    adopt: list[Adapter] = []
    loaded: list[str] = []
    waiting: list[str] = []
    backing_off: list[str] = []
    needs_inventory = False
    wake: float | None = None
    orphan_digest: dict[str, str] = {}
    in_doubt: set[str] = set()
    for name, intent in sorted(orphans.items()):
        listed = None if inventory is None else name in inventory
        found = intent_state(intent, listed, now=now, me=me, intent_grace=intent_grace, load_timeout=load_timeout)
        if found.state == "lost":
            drop_intents.append(name)
        elif found.state == "landed":
            if name not in unloads:
                unloads.append(name)  # the intent goes once the unload succeeded
            orphan_digest[name] = intent.digest
        else:
            in_doubt.add(name)
            needs_inventory = needs_inventory or (inventory is None and not probed)
            wake = _earliest(wake, min(now + INTENT_POLL_SECONDS, found.until or now))
    for adapter in desired:
        if labels.get(adapter.name) == adapter.digest:
            loaded.append(adapter.name)
            continue
        if inventory is not None and inventory.get(adapter.name) == expected_root(adapter, endpoint):
            adopt.append(adapter)
            if adapter.name in unloads:
                unloads.remove(adapter.name)
            if adapter.name in intents:
                drop_intents.append(adapter.name)
            continue
        if adapter.name in in_doubt:
            waiting.append(adapter.name)  # an older source's load is in doubt: it resolves first
            continue
        under_way = intents.get(adapter.name)
        if under_way is not None and adapter.name not in orphans:
            listed = None if inventory is None else False
            found = intent_state(
                under_way, listed, now=now, me=me, intent_grace=intent_grace, load_timeout=load_timeout
            )
            if found.state == "doubt":
                waiting.append(adapter.name)
                needs_inventory = needs_inventory or (inventory is None and not probed)
                wake = _earliest(wake, min(now + INTENT_POLL_SECONDS, found.until or now))
                continue
            drop_intents.append(adapter.name)  # lost: the load is sent again (recording a new intent)
        failure = failures.get(adapter.name)
        if failure is not None and failure.digest == adapter.digest and now < failure.retry_at:
            backing_off.append(adapter.name)
            wake = _earliest(wake, failure.retry_at)
            continue
        if inventory is None and not probed:
            needs_inventory = True
        if inventory is not None and adapter.name in inventory and adapter.name not in unloads:
            unloads.append(adapter.name)  # an older source is loaded under this name without our label
        loads.append(adapter)
    held = [
        name
        for name in unloads
        if (f := failures.get(name)) is not None
        and f.digest == (labels.get(name) or orphan_digest.get(name, ""))
        and now < f.retry_at
    ]
    for name in held:
        wake = _earliest(wake, failures[name].retry_at)
    blocked = [a for a in loads if a.name in held]  # a new source cannot be loaded over the old one
    loads = [a for a in loads if a.name not in held]
    backing_off.extend(a.name for a in blocked)
    return PodPlan(
        pod.name,
        True,
        unloads=tuple(n for n in unloads if n not in held),
        loads=tuple(loads),
        adopt=tuple(adopt),
        drop_labels=tuple(drop_labels),
        drop_intents=tuple(dict.fromkeys(drop_intents)),
        stale=stale,
        loaded=tuple(loaded),
        missing=tuple(a.name for a in desired if a.name not in loaded),
        waiting=tuple(waiting),
        backing_off=tuple(backing_off),
        needs_inventory=needs_inventory,
        wake_at=wake,
    )
