"""Pod status as the kubelet writes it: container states, phase, conditions, restarts, termination message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from kthena_py.testing.kubelet import status as st

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", "2026-01-01T00:00:09Z"


def run(name: str = "c") -> dict[str, Any]:
    return st.running(name, "img", T0)


def exited(code: int, name: str = "c") -> dict[str, Any]:
    return st.terminated(name, "img", code, started_at=T0, finished_at=T1)


def backoff(code: int, name: str = "c") -> dict[str, Any]:
    return st.waiting(name, "img", "CrashLoopBackOff", restart_count=1, last=exited(code, name))


FIRST_WAIT = st.waiting("c", "img", "ContainerCreating")


@pytest.mark.parametrize(
    ("policy", "initialized", "statuses", "phase"),
    [
        ("Never", False, [run()], "Pending"),
        ("Never", True, [], "Pending"),
        ("Never", True, [FIRST_WAIT], "Pending"),
        ("Never", True, [run(), FIRST_WAIT], "Pending"),
        ("Never", True, [run()], "Running"),
        ("Never", True, [run(), exited(1, "d")], "Running"),
        ("Never", True, [exited(0)], "Succeeded"),
        ("Never", True, [exited(0), exited(0, "d")], "Succeeded"),
        ("Never", True, [exited(0), exited(2, "d")], "Failed"),
        ("OnFailure", True, [exited(0)], "Succeeded"),
        ("OnFailure", True, [backoff(1)], "Running"),
        ("Always", True, [exited(0)], "Running"),
        ("", True, [exited(0)], "Running"),  # empty policy is Always
        ("Always", True, [backoff(0)], "Running"),
    ],
)
def test_pod_phase(policy: str, initialized: bool, statuses: list[dict[str, Any]], phase: str) -> None:
    assert st.pod_phase(policy, initialized, statuses) == phase


def test_terminated_reasons_and_last_state() -> None:
    first = exited(3)
    assert first["state"]["terminated"]["reason"] == "Error"
    assert exited(0)["state"]["terminated"]["reason"] == "Completed"
    again = st.running("c", "img", T2, restart_count=1, last=first)
    assert again["restartCount"] == 1
    assert again["lastState"] == {"terminated": first["state"]["terminated"]}
    assert again["ready"] and again["state"] == {"running": {"startedAt": T2}}
    msg = st.terminated("c", "img", 137, started_at=T0, finished_at=T1, message="killed")
    assert msg["state"]["terminated"]["message"] == "killed"
    assert msg["state"]["terminated"]["exitCode"] == 137


def by_type(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str | None, str]]:
    return {c["type"]: (c["status"], c.get("reason"), c["lastTransitionTime"]) for c in conditions}


def test_conditions_keep_transition_times_and_foreign_types() -> None:
    pending = st.conditions([], now=T0, phase="Pending", initialized=False, statuses=[FIRST_WAIT])
    assert by_type(pending) == {
        "PodScheduled": ("True", None, T0),
        "Initialized": ("False", "ContainersNotInitialized", T0),
        "ContainersReady": ("False", "ContainersNotReady", T0),
        "Ready": ("False", "ContainersNotReady", T0),
    }
    foreign = {"type": "DisruptionTarget", "status": "True", "lastTransitionTime": T0}
    running = st.conditions([*pending, foreign], now=T1, phase="Running", initialized=True, statuses=[run()])
    assert by_type(running) == {
        "PodScheduled": ("True", None, T0),  # unchanged: keeps its time
        "Initialized": ("True", None, T1),
        "ContainersReady": ("True", None, T1),
        "Ready": ("True", None, T1),
        "DisruptionTarget": ("True", None, T0),
    }
    done = st.conditions(running, now=T2, phase="Succeeded", initialized=True, statuses=[exited(0)])
    assert by_type(done)["Ready"] == ("False", "PodCompleted", T2)
    assert by_type(done)["Initialized"] == ("True", None, T1)


def test_pod_status_is_the_whole_status() -> None:
    pod = {"spec": {"restartPolicy": "Never"}, "status": {"qosClass": "Burstable"}}
    init = exited(0, "init")
    status = st.pod_status(
        pod, now=T1, pod_ip="127.100.250.3", host_ip="127.0.0.1", start_time=T0,
        initialized=True, init_statuses=[init], statuses=[exited(4)],
    )  # fmt: skip
    assert status["phase"] == "Failed"
    assert (status["podIP"], status["podIPs"], status["hostIP"]) == (
        "127.100.250.3",
        [{"ip": "127.100.250.3"}],
        "127.0.0.1",
    )
    assert status["startTime"] == T0 and status["qosClass"] == "Burstable"
    assert status["initContainerStatuses"] == [init]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    forced = st.pod_status(
        pod, now=T1, pod_ip="ip", host_ip="h", start_time=T0, initialized=False,
        init_statuses=[exited(1, "init")], statuses=[FIRST_WAIT], phase="Failed",
    )  # fmt: skip
    assert forced["phase"] == "Failed"


@pytest.mark.parametrize(
    ("policy", "code", "restart"),
    [("Never", 0, False), ("Never", 1, False), ("OnFailure", 0, False), ("OnFailure", 1, True),
     ("Always", 0, True), ("", 0, True)],
)  # fmt: skip
def test_should_restart(policy: str, code: int, restart: bool) -> None:
    assert st.should_restart(policy, code) is restart


@given(hs.integers(min_value=0, max_value=10_000))
def test_restart_delay_grows_and_is_capped(count: int) -> None:
    assert 0 < st.restart_delay(count) <= 2.0
    assert st.restart_delay(count) <= st.restart_delay(count + 1)


@pytest.mark.parametrize(
    ("policy", "file", "log", "code", "message"),
    [
        ("File", b"done", b"log", 0, "done"),
        ("File", b"", b"log", 1, ""),
        ("FallbackToLogsOnError", b"", b"a\nb\n", 1, "a\nb\n"),
        ("FallbackToLogsOnError", b"", b"a\n", 0, ""),
        ("FallbackToLogsOnError", b"file wins", b"a\n", 1, "file wins"),
        ("File", b"x" * 5000, b"", 0, "x" * 4096),
        ("FallbackToLogsOnError", b"", b"".join(b"%d\n" % i for i in range(100)), 2,
         "".join(f"{i}\n" for i in range(20, 100))),
        ("FallbackToLogsOnError", b"", b"y" * 3000, 2, "y" * 2048),
        ("File", b"\xff", b"", 0, "\ufffd"),
    ],
)  # fmt: skip
def test_termination_message(policy: str, file: bytes, log: bytes, code: int, message: str) -> None:
    assert st.termination_message(policy, file, log, code) == message
