"""What the pool controller observes of a pool's members, read live from the API server.

Guarantees:

* Members are read with two live calls per pass (the ModelServings of the namespace, and the pods labelled with
  one of the members' names), never from a cache that may lag behind the controller's own writes: a swap step
  that raises a member is decided on what the API server shows at that moment.
* A ModelServing being deleted counts as missing. Pods count while they exist, terminating ones included.
* A member *fails* when one of its pods is in phase Failed or has a container waiting in a crash loop or on an
  image it cannot pull.
* ``former`` members (no longer in ``spec.members``, :func:`~kthena_py.plan.modelpool.view.former_members`) are
  observed the same way, so the slot guard counts their pods until they are gone.
* ``Member.waiting`` says, for a member with pods and none Ready, what the first such pod waits for: scheduling
  (the scheduler's message), a container's waiting reason, or its readiness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject, labels_of, name_of
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.view import Member, PoolSpec
from kthena_py.vocab.conditions import POD_SCHEDULED, READY
from kthena_py.vocab.labels import SERVING_ENTRY, SERVING_NAME
from kthena_py.vocab.pods import is_terminating, phase_of, running_and_ready

from ..resources import MODELSERVINGS

__all__ = ["Observed", "observe", "ready_entry_pods", "waiting_for"]

_FAILING_WAITS = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName"})


class Observed:
    """One pass's live view: members, their ModelServings and pods."""

    def __init__(self, members: dict[str, Member], servings: dict[str, KubeObject], pods: dict[str, list[KubeObject]]):
        self.members = members
        self.servings = servings
        self.pods = pods


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _failing(pod: KubeObject) -> bool:
    if phase_of(pod) == "Failed":
        return True
    statuses = _dict(pod.get("status")).get("containerStatuses") or []
    return any(_dict(_dict(_dict(s).get("state")).get("waiting")).get("reason") in _FAILING_WAITS for s in statuses)


def _selects(ms: KubeObject, selector: Iterable[tuple[str, str]]) -> bool:
    wanted = dict(selector)
    if not wanted:
        return True
    for role in _dict(_dict(ms.get("spec")).get("template")).get("roles") or []:
        entry = _dict(_dict(_dict(role).get("entryTemplate")).get("spec"))
        chosen = _dict(entry.get("nodeSelector"))
        return all(chosen.get(k) == v for k, v in wanted.items())
    return False


def ready_entry_pods(pods: Iterable[KubeObject]) -> list[KubeObject]:
    """Entry pods Running and Ready with an IP, not terminating."""
    return [
        p
        for p in pods
        if labels_of(p).get(SERVING_ENTRY) == "true"
        and running_and_ready(p)
        and not is_terminating(p)
        and _dict(p.get("status")).get("podIP")
    ]


def _condition(pod: KubeObject, kind: str) -> Mapping[str, Any]:
    for c in _dict(pod.get("status")).get("conditions") or []:
        if _dict(c).get("type") == kind:
            return _dict(c)
    return {}


def waiting_for(pods: Iterable[KubeObject]) -> str:
    """What the first not-Ready pod waits for (empty when one is Ready or there is none)."""
    pods = [p for p in pods if not is_terminating(p)]
    if not pods or any(running_and_ready(p) for p in pods):
        return ""
    pod = sorted(pods, key=name_of)[0]
    scheduled = _condition(pod, POD_SCHEDULED)
    if scheduled.get("status") == "False":
        why = f"{scheduled.get('reason') or 'Pending'}: {scheduled.get('message') or ''}"
        return f"pod {name_of(pod)} is not scheduled ({why})"
    for s in _dict(pod.get("status")).get("containerStatuses") or []:
        waiting = _dict(_dict(_dict(s).get("state")).get("waiting"))
        if waiting.get("reason"):
            return f"pod {name_of(pod)} container {_dict(s).get('name')} waits ({waiting.get('reason')})"
    ready = _condition(pod, READY)
    detail = ready.get("reason") or "readiness probe not passing"
    return f"pod {name_of(pod)} is {phase_of(pod) or 'Pending'} but not Ready ({detail})"


async def observe(client: KubeApi, namespace: str, spec: PoolSpec, former: Iterable[str] = ()) -> Observed:
    """Read the pool's members (and ``former`` members) live (see the module docstring)."""
    tracked = [*spec.members, *(f for f in former if f not in spec.members)]
    names = set(tracked)
    servings = {
        name_of(ms): ms
        for ms in (await client.list(MODELSERVINGS, namespace)).items
        if name_of(ms) in names and not is_terminating(ms)
    }
    pods: dict[str, list[KubeObject]] = {n: [] for n in tracked}
    if names:
        selector = f"{SERVING_NAME} in ({','.join(sorted(names))})"
        for pod in (await client.list_all(PODS, namespace, label_selector=selector)).items:
            owner = labels_of(pod).get(SERVING_NAME)
            if owner in pods:
                pods[owner].append(pod)
    members: dict[str, Member] = {}
    for name in tracked:
        ms = servings.get(name)
        if ms is None:
            members[name] = Member(name, exists=False, pods=len(pods[name]))
            continue
        replicas = _dict(ms.get("spec")).get("replicas", 1)  # Kthena's default when unset
        members[name] = Member(
            name,
            replicas=replicas if isinstance(replicas, int) and replicas > 0 else 0,
            pods=len(pods[name]),
            ready_pods=len(ready_entry_pods(pods[name])),
            failed=any(_failing(p) for p in pods[name]),
            selects_pool_nodes=_selects(ms, spec.node_selector),
            waiting=waiting_for(pods[name]),
        )
    return Observed(members, servings, pods)
