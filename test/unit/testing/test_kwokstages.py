"""The cluster tier's kwok stages: which of the tier's own stages may match a pod restarting in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kthena_py.testing.controlplane import kwokstages


def _stock_stages(tmp_path: Path) -> Path:
    """Minimal stand-ins for kwok's stock stage files (only their names and selectors are read here)."""
    for name in ("node-initialize", "pod-ready", "pod-complete", "pod-delete"):
        doc = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {"matchExpressions": []},
                "next": {"statusTemplate": 'status: "True"\n  type: Ready\nready: true'},
            },
        }
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def _by_name(tmp_path: Path) -> dict[str, dict[str, Any]]:
    docs = kwokstages.stage_documents(_stock_stages(tmp_path), pod_ready_delay_ms=0, inplace_ready_delay_ms=500)
    return {doc["metadata"]["name"]: doc for doc in docs}


def _excluded(stage: dict[str, Any]) -> set[str]:
    return {e["key"] for e in stage["spec"]["selector"]["matchExpressions"] if e["operator"] == "DoesNotExist"}


def test_a_released_pod_restarting_in_place_is_left_to_the_in_place_stages(tmp_path: Path) -> None:
    """Were the released stage to match a restarted pod too, kwok could write it Ready with a restart count of 0."""
    stages = _by_name(tmp_path)
    released = _excluded(stages["pod-ready-released"])
    restart_selectors = {e["key"] for e in stages["pod-inplace-restart"]["spec"]["selector"]["matchExpressions"]}
    ready_selectors = {e["key"] for e in stages["pod-inplace-ready"]["spec"]["selector"]["matchExpressions"]}
    # Whatever selects the in-place stages' pods (an image drift, a container restarted and not ready) excludes them
    # from the released stage, and so does an image that cannot be pulled.
    drift = restart_selectors - {".metadata.deletionTimestamp", ".status.phase"}
    restarted = (
        ready_selectors - _excluded(stages["pod-inplace-ready"]) - {".metadata.deletionTimestamp", ".status.phase"}
    )
    assert drift and drift <= released
    assert restarted and restarted <= released
    assert _excluded(stages["pod-inplace-ready"]) <= released
