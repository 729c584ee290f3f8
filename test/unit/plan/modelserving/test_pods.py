"""Pod and headless Service rendering (kthena_py.plan.modelserving.render.pods)."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.api.modelserving import Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import revision_data
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.plan.modelserving.render.pods import (
    RenderContext,
    build_pod,
    build_role_pods,
    build_service,
)

REF = MSRef("llama", "ns", "uid-1")


def _role(**overrides: Any) -> Role:
    doc: dict[str, Any] = {
        "name": "prefill",
        "workerReplicas": 2,
        "entryTemplate": {
            "metadata": {
                "labels": {
                    "app": "llm",
                    naming.LABEL_ROLE: "spoofed",
                    naming.LABEL_NAME: "spoofed",
                    naming.LABEL_ENTRY: "false",
                },
                "annotations": {"team": "a"},
            },
            "spec": {
                "schedulerName": "other",
                "initContainers": [
                    {"name": "init", "image": "busybox", "env": [{"name": "WORKER_INDEX", "value": "9"}]}
                ],
                "containers": [
                    {
                        "name": "main",
                        "image": "vllm",
                        "env": [{"name": "A", "value": "1"}, {"name": "GROUP_SIZE", "value": "99"}],
                    },
                    {"name": "side", "image": "sidecar"},
                ],
            },
        },
        "workerTemplate": {
            "metadata": {"labels": {"app": "llm-worker", naming.LABEL_ENTRY: "true"}},
            "spec": {"containers": [{"name": "main", "image": "vllm-worker"}]},
        },
    }
    doc.update(overrides)
    return Role.model_validate(doc)


def _ctx(
    role: Role, gang: bool = True, scheduler: str = "volcano", plugins: list[dict[str, Any]] | None = None
) -> RenderContext:
    from kthena_py.api.modelserving import ModelServingSpec

    spec = ModelServingSpec.model_validate(
        {
            "schedulerName": scheduler,
            "template": {"roles": [role.model_dump(by_alias=True, exclude_none=True)]},
            "plugins": plugins,
        }
    )
    return RenderContext(REF, "rev1", revision_data(spec), gang)


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


@pytest.mark.parametrize(("index", "worker_index"), [(0, "0"), (1, "1"), (2, "2")])
def test_env_injected_in_every_container(index: int, worker_index: str) -> None:
    role = _role()
    pod = build_pod(_ctx(role), role, 3, 1, index, "h1")
    spec = pod["spec"]
    containers = spec["containers"] + spec.get("initContainers", [])
    assert containers
    for c in containers:
        env = _env(c)
        assert env["GROUP_SIZE"] == "3"
        assert env["ENTRY_ADDRESS"] == "llama-3-prefill-1-0.ns"
        assert env["WORKER_INDEX"] == worker_index
        names = [e["name"] for e in c["env"]]
        assert names[-3:] == ["GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX"]
        assert len(names) == len(set(names))
    if index == 0:
        assert _env(spec["containers"][0])["A"] == "1"


def test_entry_pod_labels_annotations_and_owner() -> None:
    role = _role()
    pod = build_pod(_ctx(role), role, 0, 1, 0, "h1")
    meta = pod["metadata"]
    assert meta["name"] == "llama-0-prefill-1-0" and meta["namespace"] == "ns"
    assert meta["labels"] == {
        "app": "llm",
        naming.LABEL_NAME: "llama",
        naming.LABEL_GROUP_NAME: "llama-0",
        naming.LABEL_ROLE: "prefill",
        naming.LABEL_ROLE_ID: "prefill-1",
        naming.LABEL_REVISION: "rev1",
        naming.LABEL_ROLE_TEMPLATE_HASH: "h1",
        naming.LABEL_ENTRY: "true",
    }
    assert meta["annotations"] == {
        "team": "a",
        naming.ANNOTATION_PODGROUP: "llama-0",
        naming.ANNOTATION_TASK_SPEC: "prefill-1",
    }
    assert meta["ownerReferences"] == [naming.owner_reference(REF)]
    assert pod["spec"]["schedulerName"] == "volcano"


def test_worker_never_carries_the_entry_label() -> None:
    role = _role()
    pod = build_pod(_ctx(role), role, 0, 0, 1, "h1")
    assert naming.LABEL_ENTRY not in pod["metadata"]["labels"]
    assert pod["metadata"]["labels"]["app"] == "llm-worker"
    assert pod["spec"]["containers"][0]["image"] == "vllm-worker"


def test_no_volcano_annotations_without_gang() -> None:
    role = _role()
    pod = build_pod(_ctx(role, gang=False, scheduler="default-scheduler"), role, 0, 0, 0, "h1")
    assert pod["metadata"]["annotations"] == {"team": "a"}
    assert pod["spec"]["schedulerName"] == "default-scheduler"


def test_template_is_not_mutated() -> None:
    role = _role()
    before = role.model_dump()
    build_pod(_ctx(role), role, 0, 0, 0, "h1")
    assert role.model_dump() == before


def test_role_pods_are_workers_first_entry_last() -> None:
    role = _role()
    pods = build_role_pods(_ctx(role), role, 0, 0, "h1")
    assert [p["metadata"]["name"] for p in pods] == [
        "llama-0-prefill-0-1",
        "llama-0-prefill-0-2",
        "llama-0-prefill-0-0",
    ]


def test_headless_service() -> None:
    svc = build_service(REF, 2, "prefill", 1)
    assert svc["metadata"]["name"] == "llama-2-prefill-1-0"
    assert svc["metadata"]["labels"] == {
        naming.LABEL_NAME: "llama",
        naming.LABEL_GROUP_NAME: "llama-2",
        naming.LABEL_ROLE: "prefill",
        naming.LABEL_ROLE_ID: "prefill-1",
    }
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {
            naming.LABEL_GROUP_NAME: "llama-2",
            naming.LABEL_ROLE: "prefill",
            naming.LABEL_ROLE_ID: "prefill-1",
            naming.LABEL_ENTRY: "true",
        },
    }
    assert svc["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True


def test_service_only_with_worker_template() -> None:
    assert naming.needs_service(_role())
    assert naming.needs_service(_role(workerReplicas=0))
    assert not naming.needs_service(_role(workerReplicas=0, workerTemplate=None))


def test_plugins_cannot_break_controller_labels_or_env() -> None:
    role = _role()
    plugins = [
        {
            "name": "demo-pod-tweaks",
            "config": {
                "labels": {naming.LABEL_ROLE: "x", "extra": "y"},
                "env": [{"name": "WORKER_INDEX", "value": "7"}, {"name": "TWEAK", "value": "1"}],
                "runtimeClassName": "nvidia",
                "annotations": {"p": "q"},
                "nodeSelector": {"gpu": "a100"},
            },
        }
    ]
    pod = build_pod(_ctx(role, plugins=plugins), role, 0, 0, 0, "h1")
    assert pod["metadata"]["labels"][naming.LABEL_ROLE] == "prefill"
    assert pod["metadata"]["labels"]["extra"] == "y"
    assert pod["metadata"]["annotations"]["p"] == "q"
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    env = _env(pod["spec"]["containers"][0])
    assert env["WORKER_INDEX"] == "0" and env["TWEAK"] == "1"
