"""Pod status as the kubelet writes it, built from what the mini-kubelet observed (pure: no I/O, no clock).

* Container statuses: :func:`waiting`, :func:`running`, :func:`terminated` build ``status.containerStatuses[]``
  entries; a restarted container carries its previous run as ``lastState``.
* The phase follows the kubelet's rule (:func:`pod_phase`): Pending while the pod is not initialised or a
  container waits for its first start; Running while one runs or will be restarted; once all have stopped for good,
  Succeeded when every exit code is 0, else Failed.
* Conditions (:func:`conditions`): PodScheduled, Initialized, ContainersReady and Ready, with the kubelet's reasons;
  a condition whose status does not change keeps its ``lastTransitionTime``; condition types the kubelet does not
  own (e.g. ``DisruptionTarget``) are kept as they are.
* Restarts (:func:`should_restart`, :func:`restart_delay`) follow ``restartPolicy`` with a short exponential
  backoff, and the termination message (:func:`termination_message`) follows ``terminationMessagePolicy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kthena_py.vocab.conditions import CONTAINERS_READY, POD_INITIALIZED, POD_READY, POD_SCHEDULED

__all__ = [
    "MAX_LOG_TAIL_BYTES",
    "MAX_LOG_TAIL_LINES",
    "MAX_MESSAGE_BYTES",
    "conditions",
    "pod_phase",
    "pod_status",
    "restart_delay",
    "running",
    "should_restart",
    "terminated",
    "termination_message",
    "waiting",
]

MAX_MESSAGE_BYTES = 4096
"""The most of a termination-message file that reaches the status."""
MAX_LOG_TAIL_LINES = 80
MAX_LOG_TAIL_BYTES = 2048
"""``FallbackToLogsOnError`` takes at most this many last lines and bytes of the log (the kubelet's limits)."""

Status = dict[str, Any]


def _with_last(status: Status, last: Mapping[str, Any] | None) -> Status:
    if last is not None:
        status["lastState"] = {"terminated": dict(last["state"]["terminated"])}
    return status


def waiting(
    name: str, image: str, reason: str, message: str = "", *, restart_count: int = 0, last: Status | None = None
) -> Status:
    """A container that has not started (or waits to be restarted).

    Args:
        name: Container name.
        image: Its image.
        reason: The waiting reason (``ContainerCreating``, ``ErrImagePull``, ``CrashLoopBackOff``...).
        message: Details.
        restart_count: Restarts so far.
        last: Its previous :func:`terminated` status, if any.

    Returns:
        The ``containerStatuses[]`` entry.
    """
    state: Status = {"reason": reason}
    if message:
        state["message"] = message
    return _with_last(
        {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": restart_count,
            "state": {"waiting": state},
        },
        last,
    )


def running(name: str, image: str, started_at: str, *, restart_count: int = 0, last: Status | None = None) -> Status:
    """A running container (ready: the mini-kubelet runs no probes).

    Args:
        name: Container name.
        image: Its image.
        started_at: RFC 3339 start time.
        restart_count: Restarts so far.
        last: Its previous :func:`terminated` status, if any.

    Returns:
        The ``containerStatuses[]`` entry.
    """
    return _with_last(
        {
            "name": name,
            "image": image,
            "imageID": "",
            "containerID": f"mini-kubelet://{name}-{restart_count}",
            "ready": True,
            "started": True,
            "restartCount": restart_count,
            "state": {"running": {"startedAt": started_at}},
        },
        last,
    )


def terminated(
    name: str,
    image: str,
    exit_code: int,
    *,
    started_at: str,
    finished_at: str,
    message: str = "",
    restart_count: int = 0,
    last: Status | None = None,
) -> Status:
    """A container that exited.

    Args:
        name: Container name.
        image: Its image.
        exit_code: Exit code (128 + N for a process killed by signal N).
        started_at: RFC 3339 start time.
        finished_at: RFC 3339 end time.
        message: The termination message.
        restart_count: Restarts so far.
        last: Its previous :func:`terminated` status, if any.

    Returns:
        The ``containerStatuses[]`` entry, reason ``Completed`` for exit code 0, else ``Error``.
    """
    state: Status = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": started_at,
        "finishedAt": finished_at,
        "containerID": f"mini-kubelet://{name}-{restart_count}",
    }
    if message:
        state["message"] = message
    return _with_last(
        {
            "name": name,
            "image": image,
            "imageID": "",
            "containerID": f"mini-kubelet://{name}-{restart_count}",
            "ready": False,
            "started": False,
            "restartCount": restart_count,
            "state": {"terminated": state},
        },
        last,
    )


def should_restart(restart_policy: str, exit_code: int) -> bool:
    """Whether a container that exited is started again.

    Args:
        restart_policy: The pod's ``restartPolicy`` (``Always`` when empty).
        exit_code: The exit code.

    Returns:
        True for ``Always``, and for ``OnFailure`` with a non-zero exit code.
    """
    policy = restart_policy or "Always"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def restart_delay(restart_count: int, *, base: float = 0.2, cap: float = 2.0) -> float:
    """Seconds to wait before the next start of a container (the kubelet's crash-loop backoff, shortened).

    Args:
        restart_count: Restarts so far (0 before the first restart).
        base: Delay before the first restart.
        cap: Longest delay.

    Returns:
        ``base * 2**restart_count``, at most ``cap``.
    """
    return float(min(cap, base * 2 ** min(restart_count, 32)))


def termination_message(policy: str, file_content: bytes, log_tail: bytes, exit_code: int) -> str:
    """The message of an exited container.

    Args:
        policy: ``terminationMessagePolicy`` (``File`` when empty, or ``FallbackToLogsOnError``).
        file_content: What the container wrote to its ``terminationMessagePath``.
        log_tail: The end of its log (used only with ``FallbackToLogsOnError``).
        exit_code: Its exit code.

    Returns:
        At most :data:`MAX_MESSAGE_BYTES` of the file; with ``FallbackToLogsOnError``, an empty file and a non-zero
        exit code, the last :data:`MAX_LOG_TAIL_LINES` lines of the log (at most :data:`MAX_LOG_TAIL_BYTES`).
    """
    message = file_content[:MAX_MESSAGE_BYTES]
    if not message and policy == "FallbackToLogsOnError" and exit_code != 0:
        lines = log_tail.splitlines(keepends=True)[-MAX_LOG_TAIL_LINES:]
        message = b"".join(lines)[-MAX_LOG_TAIL_BYTES:]
    return message.decode(errors="replace")


def pod_phase(restart_policy: str, initialized: bool, statuses: Sequence[Mapping[str, Any]]) -> str:
    """The pod phase from its containers' statuses (the kubelet's rule).

    Args:
        restart_policy: The pod's ``restartPolicy``.
        initialized: All init containers succeeded.
        statuses: The app containers' statuses.

    Returns:
        ``Pending``, ``Running``, ``Succeeded`` or ``Failed``.
    """
    if not initialized:
        return "Pending"
    waiting_first = run = stopped = succeeded = 0
    for status in statuses:
        state = status.get("state") or {}
        if "running" in state:
            run += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"].get("exitCode") == 0
        elif "terminated" in (status.get("lastState") or {}):
            stopped += 1  # waiting for a restart
        else:
            waiting_first += 1
    if waiting_first or not statuses:
        return "Pending"
    if run:
        return "Running"
    policy = restart_policy or "Always"
    if policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Running" if policy == "OnFailure" else "Failed"


def _condition(type_: str, ok: bool, reason: str, now: str, existing: Mapping[str, Mapping[str, Any]]) -> Status:
    status = "True" if ok else "False"
    old = existing.get(type_) or {}
    since = old.get("lastTransitionTime") if old.get("status") == status else None
    cond: Status = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": since or now}
    if not ok and reason:
        cond["reason"] = reason
    return cond


_OWNED = (POD_SCHEDULED, POD_INITIALIZED, CONTAINERS_READY, POD_READY)


def conditions(
    existing: Sequence[Mapping[str, Any]],
    *,
    now: str,
    phase: str,
    initialized: bool,
    statuses: Sequence[Mapping[str, Any]],
) -> list[Status]:
    """The pod's conditions.

    Args:
        existing: The conditions the pod has now.
        now: RFC 3339 time for changed conditions.
        phase: The pod's phase (:func:`pod_phase`).
        initialized: All init containers succeeded.
        statuses: The app containers' statuses.

    Returns:
        PodScheduled, Initialized, ContainersReady and Ready, then the other conditions of ``existing``.
    """
    by_type = {str(c.get("type")): c for c in existing}
    terminal = phase in ("Succeeded", "Failed")
    ready = initialized and bool(statuses) and all(s.get("ready") for s in statuses)
    not_ready_reason = "PodCompleted" if terminal else "ContainersNotReady"
    result = [
        _condition(POD_SCHEDULED, True, "", now, by_type),
        _condition(POD_INITIALIZED, initialized or terminal, "ContainersNotInitialized", now, by_type),
        _condition(CONTAINERS_READY, ready, not_ready_reason, now, by_type),
        _condition(POD_READY, ready, not_ready_reason, now, by_type),
    ]
    result.extend(dict(c) for c in existing if c.get("type") not in _OWNED)
    return result


def pod_status(
    pod: Mapping[str, Any],
    *,
    now: str,
    pod_ip: str,
    host_ip: str,
    start_time: str,
    initialized: bool,
    init_statuses: Sequence[Mapping[str, Any]],
    statuses: Sequence[Mapping[str, Any]],
    phase: str | None = None,
) -> Status:
    """The whole ``status`` the mini-kubelet writes (a JSON merge patch of the status subresource).

    Args:
        pod: The pod as last seen (for its restart policy and current conditions).
        now: RFC 3339 time for changed conditions.
        pod_ip: The pod's IP.
        host_ip: The node's IP.
        start_time: When the kubelet accepted the pod.
        initialized: All init containers succeeded.
        init_statuses: The init containers' statuses.
        statuses: The app containers' statuses.
        phase: Forces a phase (``Failed`` after a failed init container); default: :func:`pod_phase`.

    Returns:
        The status.
    """
    spec = pod.get("spec") or {}
    current = (pod.get("status") or {}).get("conditions") or []
    phase = phase or pod_phase(str(spec.get("restartPolicy") or ""), initialized, statuses)
    status: Status = {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": start_time,
        "qosClass": (pod.get("status") or {}).get("qosClass") or "BestEffort",
        "conditions": conditions(current, now=now, phase=phase, initialized=initialized, statuses=statuses),
        "containerStatuses": [dict(s) for s in statuses],
    }
    if init_statuses:
        status["initContainerStatuses"] = [dict(s) for s in init_statuses]
    return status
