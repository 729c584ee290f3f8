"""The activator's pure decisions: tables and properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.activator.backends import Backend, choose_backend, entry_backends
from kthena_py.plan.activator.directory import build_directory
from kthena_py.plan.activator.errors import read_model
from kthena_py.plan.activator.reasons import unavailable_reason
from kthena_py.plan.activator.retry import retry_delay
from kthena_py.plan.activator.scaling import needs_wake
from kthena_py.plan.activator.targets import (
    DEFAULT_PORT,
    models_of,
    opted_in,
    parse_hold_budget,
    port_of,
)
from kthena_py.plan.modelserving.core import naming
from kthena_py.vocab.labels import (
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_MODEL,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
    ENTRY_VALUE,
    SERVING_ENTRY,
    SERVING_NAME,
)


def ms(
    name: str, ns: str = "ns", replicas: int = 0, ports: list[int] | None = None, **annotations: str
) -> dict[str, Any]:
    containers = [{"name": "engine", "image": "engine:1", "ports": [{"containerPort": p} for p in ports or []]}]
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "annotations": dict(annotations)},
        "spec": {
            "replicas": replicas,
            "template": {
                "roles": [
                    {
                        "name": "r",
                        "replicas": 1,
                        "workerReplicas": 0,
                        "entryTemplate": {"spec": {"containers": containers}},
                    }
                ]
            },
        },
    }


def pod(
    name: str,
    *,
    ready: bool = True,
    entry: bool = True,
    ip: str = "10.0.0.1",
    terminating: bool = False,
    phase: str = "Running",
) -> dict[str, Any]:
    labels = {SERVING_NAME: "m"}
    if entry:
        labels[SERVING_ENTRY] = ENTRY_VALUE
    md: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels}
    if terminating:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": md,
        "status": {"phase": phase, "podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def policy(target: str, minimum: int, ns: str = "ns", kind: str = "ModelServing") -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{target}", "namespace": ns},
        "spec": {
            "homogeneousTarget": {
                "target": {"targetRef": {"kind": kind, "name": target}},
                "minReplicas": minimum,
                "maxReplicas": 3,
            }
        },
    }


@pytest.mark.parametrize(
    ("annotation", "want"),
    [(None, ("llm",)), ("", ("llm",)), ("a,b", ("a", "b")), (" a , ,b,a ", ("a", "b"))],
)
def test_models_of(annotation: str | None, want: tuple[str, ...]) -> None:
    obj = ms("llm") if annotation is None else ms("llm", **{"x": "y"})
    if annotation is not None:
        obj["metadata"]["annotations"][ACTIVATOR_MODEL] = annotation
    assert models_of(obj) == want


@pytest.mark.parametrize(
    ("annotation", "ports", "want"),
    [
        (None, [], DEFAULT_PORT),
        (None, [9000, 9001], 9000),
        ("7000", [9000], 7000),
        ("nope", [9000], 9000),
        ("70000", [], DEFAULT_PORT),
    ],
)
def test_port_of(annotation: str | None, ports: list[int], want: int) -> None:
    obj = ms("llm", ports=ports)
    if annotation is not None:
        obj["metadata"]["annotations"][ACTIVATOR_PORT] = annotation
    assert port_of(obj) == want


@pytest.mark.parametrize(
    ("annotations", "policies", "want"),
    [
        ({}, [], False),
        ({ACTIVATOR_SCALE_FROM_ZERO: "true"}, [], True),
        ({ACTIVATOR_SCALE_FROM_ZERO: "TRUE"}, [], True),
        ({ACTIVATOR_SCALE_FROM_ZERO: "false"}, [], False),
        ({}, [policy("llm", 0)], True),
        ({}, [policy("llm", 1)], False),
        ({}, [policy("other", 0)], False),
        ({}, [policy("llm", 0, ns="elsewhere")], False),
        ({}, [policy("llm", 0, kind="Deployment")], False),
    ],
)
def test_opted_in(annotations: dict[str, str], policies: list[dict[str, Any]], want: bool) -> None:
    assert (
        opted_in(ms("llm", **{}) | {"metadata": {**ms("llm")["metadata"], "annotations": annotations}}, policies)
        is want
    )


def test_heterogeneous_policy_opts_in_its_param() -> None:
    p = {
        "metadata": {"namespace": "ns"},
        "spec": {
            "heterogeneousTarget": {
                "params": [
                    {"target": {"targetRef": {"name": "a"}}, "minReplicas": 1, "maxReplicas": 2},
                    {"target": {"targetRef": {"name": "b"}}, "minReplicas": 0, "maxReplicas": 2},
                ]
            }
        },
    }
    assert not opted_in(ms("a"), [p])
    assert opted_in(ms("b"), [p])


@pytest.mark.parametrize(("text", "want"), [("120s", 120.0), ("2m", 120.0), ("1.5s", 1.5), ("500ms", 0.5)])
def test_hold_budget(text: str, want: float) -> None:
    assert parse_hold_budget(text) == want


@pytest.mark.parametrize("text", ["", "0", "-1s", "soon", "10"])
def test_bad_hold_budget(text: str) -> None:
    with pytest.raises(ValueError):
        parse_hold_budget(text)


def test_directory_first_claim_wins_and_reports_clash_and_bad_budget() -> None:
    a = ms("a", **{ACTIVATOR_MODEL: "shared", ACTIVATOR_HOLD_BUDGET: "later"})
    b = ms("b", **{ACTIVATOR_MODEL: "shared,own", ACTIVATOR_HOLD_BUDGET: "30s"})
    directory = build_directory([b, a], [], 120.0)
    assert directory.resolve("shared") is not None and directory.resolve("shared").name == "a"  # type: ignore[union-attr]
    assert directory.resolve("own").hold_budget == 30.0  # type: ignore[union-attr]
    assert directory.resolve("shared").hold_budget == 120.0  # type: ignore[union-attr]
    assert directory.models() == ["own", "shared"]
    assert any("shared" in p and "ns/b" in p for p in directory.problems)
    assert any(ACTIVATOR_HOLD_BUDGET in p for p in directory.problems)
    assert directory.resolve("b") is None


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        ([pod("p1")], ["p1"]),
        ([pod("p1", ready=False)], []),
        ([pod("p1", entry=False)], []),
        ([pod("p1", terminating=True)], []),
        ([pod("p1", ip="")], []),
        ([pod("p1", phase="Pending")], []),
        ([pod("p2"), pod("p1")], ["p1", "p2"]),
    ],
)
def test_entry_backends(pods: list[dict[str, Any]], want: list[str]) -> None:
    assert [b.pod for b in entry_backends(pods, 8000)] == want


_names = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)


@given(_names, st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 5)), st.sets(st.sampled_from("abcdefgh")))
def test_choose_backend_is_least_in_flight_then_by_name(
    names: list[str], in_flight: dict[str, int], exclude: set[str]
) -> None:
    backends = [Backend(n, "10.0.0.1", 80) for n in names]
    chosen = choose_backend(backends, in_flight, exclude)
    usable = [b for b in backends if b.pod not in exclude]
    if not usable:
        assert chosen is None
        return
    assert chosen is not None and chosen.pod not in exclude
    assert all(in_flight.get(chosen.pod, 0) <= in_flight.get(b.pod, 0) for b in usable)
    ties = [b.pod for b in usable if in_flight.get(b.pod, 0) == in_flight.get(chosen.pod, 0)]
    assert chosen.pod == min(ties)
    assert choose_backend(list(reversed(backends)), in_flight, exclude) == chosen


@given(st.integers(0, 5), st.booleans())
def test_needs_wake_only_from_zero_when_opted_in(replicas: int, opted: bool) -> None:
    assert needs_wake(replicas, opted) is (opted and replicas == 0)


@pytest.mark.parametrize(
    ("failure", "status", "sent", "remaining", "retried"),
    [
        ("refused", None, False, 10.0, True),
        ("status", 503, False, 10.0, True),
        ("status", 502, False, 10.0, True),
        ("status", 500, False, 10.0, False),
        ("status", 503, True, 10.0, False),
        ("refused", None, False, 0.0, False),
        ("refused", None, False, 0.01, False),
        ("other", None, False, 10.0, False),
    ],
)
def test_retry_table(failure: Any, status: int | None, sent: bool, remaining: float, retried: bool) -> None:
    delay = retry_delay(attempt=1, failure=failure, status=status, first_byte_sent=sent, remaining=remaining)
    assert (delay is not None) is retried


@given(st.integers(1, 30), st.floats(0, 100))
def test_retry_delay_grows_and_fits_the_budget(attempt: int, remaining: float) -> None:
    delay = retry_delay(attempt=attempt, failure="refused", status=None, first_byte_sent=False, remaining=remaining)
    if delay is not None:
        assert 0 < delay < remaining and delay <= 1.0
        later = retry_delay(attempt=attempt + 1, failure="refused", status=None, first_byte_sent=False, remaining=1e9)
        assert later is not None and later >= delay


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_json"),
        (b"[1]", 400, "invalid_json"),
        (b"{}", 400, "missing_model"),
        (b'{"model": ""}', 400, "missing_model"),
        (b'{"model": 3}', 400, "missing_model"),
        (b"\xff\xfe", 400, "invalid_json"),
        (b'{"model": "' + b"x" * 100 + b'"}', 413, "body_too_large"),
    ],
)
def test_read_model_refuses(body: bytes, status: int, code: str) -> None:
    err = read_model(body, 64)
    assert not isinstance(err, str)
    assert (err.status, err.code) == (status, code)
    assert set(err.body()["error"]) == {"message", "type", "param", "code"}


@given(st.binary(max_size=200))
def test_read_model_never_raises(body: bytes) -> None:
    result = read_model(body, 100)
    if isinstance(result, str):
        assert json.loads(body)["model"].strip() == result


def _stuck_pod(waiting: str) -> dict[str, Any]:
    stuck = pod(naming.pod_name("m", 0, "r", 0, 0), ready=False, phase="Pending")
    stuck["metadata"]["labels"].update(
        {
            naming.LABEL_GROUP_NAME: "m-0",
            naming.LABEL_ROLE: "r",
            naming.LABEL_ROLE_ID: "r-0",
            naming.LABEL_REVISION: "x",
        }
    )
    stuck["spec"] = {"nodeName": "n1", "containers": [{"name": "engine", "image": "engine:1"}]}
    stuck["status"]["containerStatuses"] = [{"name": "engine", "state": {"waiting": {"reason": waiting}}}]
    return stuck


@pytest.mark.parametrize(
    ("waiting", "want"),
    [("ImagePullBackOff", "image pull: ImagePullBackOff (1 pod)"), ("CrashLoopBackOff", "crash loop (1 pod)")],
)
def test_reason_uses_the_status_words(waiting: str, want: str) -> None:
    assert unavailable_reason(ms("m", replicas=1), [_stuck_pod(waiting)], now=0.0, scale_from_zero=True) == want


def test_reason_without_pods() -> None:
    assert unavailable_reason(ms("m", replicas=0), [], now=0.0, scale_from_zero=False).startswith(
        "scaled to zero and not"
    )
    assert unavailable_reason(ms("m", replicas=0), [], now=0.0, scale_from_zero=True).startswith("scaled to zero;")
    assert unavailable_reason(None, [], now=0.0, scale_from_zero=True) == "the ModelServing no longer exists"
    assert unavailable_reason(ms("m", replicas=1), [], now=0.0, scale_from_zero=True) == "no pod exists yet"
