"""kwok's stages for the cluster tier: the stock "fast" ones, adjusted, and the tier's own.

Guarantees (:func:`stage_documents`, what :class:`~kthena_py.testing.controlplane.cluster.ClusterTier` gives kwok):

* The stock stages from kwok's ``stages/`` directory (node-initialize, pod-ready, pod-complete, pod-delete), with
  pod-ready after ``pod_ready_delay_ms`` and never for a pod with an image under :data:`BAD_IMAGE_PREFIX` (an extra
  stage reports ``ImagePullBackOff`` for it instead), and pod-delete deleting each terminating pod once.
* A pod annotated :data:`HOLD_READY_ANNOTATION` = :data:`HOLD_READY` starts but stays not Ready until the annotation
  says :data:`RELEASED`.
* An image patch on a running pod (an in-place update) is played as the kubelet would: the container reports the new
  image with ``restartCount`` + 1 and the pod turns not Ready, then Ready again after the in-place delay (a released
  held pod too: only the in-place stages match a pod restarting in place).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BAD_IMAGE_PREFIX", "HOLD_READY", "HOLD_READY_ANNOTATION", "RELEASED", "stage_documents"]

_KWOK_STAGES = ("node-initialize.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml")

HOLD_READY_ANNOTATION = "testing.kthena-py.dev/hold-ready"
"""A pod annotated ``"true"`` is started (Running, with its pod IP) but kept not Ready; patching the annotation to
``"released"`` makes it Ready (how a test holds an engine in its loading phase)."""
HOLD_READY = "true"
RELEASED = "released"
_HOLD_READY_QUERY = f'.metadata.annotations["{HOLD_READY_ANNOTATION}"]'

BAD_IMAGE_PREFIX = "kthena-py.invalid/"
"""Pods with a container image under this prefix never start: kwok reports ``ImagePullBackOff`` for them."""

_NOT_FORCE_DELETED: dict[str, Any] = {
    "key": ".metadata.deletionGracePeriodSeconds | tostring",
    "operator": "NotIn",
    "values": ["0"],
}
"""Added to the stock pod-delete stage. kwok deletes a terminating pod by name, with no UID precondition (the
kubelet sends one). Its own grace-0 delete shows up as one more update of the pod before it is gone, and kwok
queued a second delete for that update: a few milliseconds later it could remove a *new* pod that a controller
had just created under the same name. Pods already on a zero grace period are left alone (the API server removes
them itself), so each terminating pod gets exactly one delete from kwok."""


def _pod_stage(name: str, phase: str, selectors: list[dict[str, Any]], status_template: str) -> dict[str, Any]:
    """A Stage of the tier's own for pods not being deleted, in ``phase``, matching ``selectors`` too."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": [phase]},
                    *selectors,
                ]
            },
            "next": {"statusTemplate": status_template},
        },
    }


_BAD_IMAGE_QUERY = f'.spec.containers.[] | select(.image | startswith("{BAD_IMAGE_PREFIX}")) | .name'
_BAD_IMAGE_STAGE = _pod_stage(
    "pod-image-pull-backoff",
    "Pending",
    [
        {"key": _BAD_IMAGE_QUERY, "operator": "Exists"},
        {
            "key": '.status.containerStatuses.[] | select(.state.waiting.reason == "ImagePullBackOff") | .name',
            "operator": "DoesNotExist",
        },
    ],
    (
        "phase: Pending\n"
        "conditions:\n"
        '- type: Ready\n  status: "False"\n  reason: ContainersNotReady\n'
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: false\n  restartCount: 0\n"
        "  state:\n    waiting:\n      reason: ImagePullBackOff\n"
        "{{ end }}\n"
    ),
)
_IMAGE_DRIFT_QUERY = (
    ". as $p | ($p.status.containerStatuses // [])[] "
    "| select(. as $s | any($p.spec.containers[]; .name == $s.name and .image != $s.image)) | .name"
)
"""Names of containers whose spec image differs from the image their status reports (an image patch)."""
_RESTARTED_QUERY = (
    '(.status.containerStatuses // [])[] | select(.ready == false and .lastState.terminated.reason == "Completed")'
    " | .name"
)
"""Containers restarted by :data:`_INPLACE_RESTART_STAGE` that are not ready yet."""
_INPLACE_RESTART_STAGE = _pod_stage(
    "pod-inplace-restart",
    "Running",
    [{"key": _IMAGE_DRIFT_QUERY, "operator": "Exists"}],
    # A container whose image changed restarts (restartCount + 1, its status reports the new image, not
    # ready yet) or, with an image under BAD_IMAGE_PREFIX, waits in ImagePullBackOff; the pod turns not Ready.
    f"""\
{{{{ $now := Now }}}}
{{{{ $statuses := .status.containerStatuses }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: Ready
  reason: ContainersNotReady
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  type: ContainersReady
  reason: ContainersNotReady
containerStatuses:
{{{{ range .spec.containers }}}}
{{{{ $c := . }}}}
{{{{ $restarts := 0 }}}}
{{{{ $seen := "" }}}}
{{{{ range $statuses }}}}{{{{ if eq .name $c.name }}}}
{{{{ $restarts = .restartCount }}}}{{{{ $seen = .image }}}}
{{{{ end }}}}{{{{ end }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
{{{{ if eq $seen .image }}}}
  ready: true
  restartCount: {{{{ $restarts }}}}
  started: true
  state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
{{{{ else if hasPrefix "{BAD_IMAGE_PREFIX}" .image }}}}
  ready: false
  restartCount: {{{{ $restarts }}}}
  started: false
  state: {{waiting: {{reason: ImagePullBackOff}}}}
{{{{ else }}}}
  ready: false
  restartCount: {{{{ add1 $restarts }}}}
  started: true
  lastState: {{terminated: {{exitCode: 0, reason: Completed, finishedAt: {{{{ $now | Quote }}}}}}}}
  state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
{{{{ end }}}}
{{{{ end }}}}
""",
)
"""kwok's version of the kubelet reacting to an image patch on a running pod (an in-place update)."""


def _held_ready_stage(pod_ready: dict[str, Any]) -> dict[str, Any]:
    """The stock pod-ready stage for pods annotated to hold readiness: Running with an IP, Ready ``False``."""
    stage = copy.deepcopy(pod_ready)
    stage["metadata"]["name"] = "pod-ready-held"
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": _HOLD_READY_QUERY, "operator": "In", "values": [HOLD_READY]}
    )
    template = stage["spec"]["next"]["statusTemplate"]
    for kind in ("Ready", "ContainersReady"):
        template = template.replace(f'status: "True"\n  type: {kind}\n', f'status: "False"\n  type: {kind}\n')
    template = template.replace("ready: true", "ready: false")
    stage["spec"]["next"]["statusTemplate"] = template
    return stage


_RELEASE_READY_STAGE = _pod_stage(
    "pod-ready-released",
    "Running",
    [
        {"key": _HOLD_READY_QUERY, "operator": "In", "values": [RELEASED]},
        {
            "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
            "operator": "NotIn",
            "values": ["True"],
        },
        # Not a pod in the middle of an in-place restart (the in-place stages play it, keeping its restart count),
        # nor one whose image cannot be pulled.
        {"key": _IMAGE_DRIFT_QUERY, "operator": "DoesNotExist"},
        {"key": _RESTARTED_QUERY, "operator": "DoesNotExist"},
        {"key": _BAD_IMAGE_QUERY, "operator": "DoesNotExist"},
    ],
    (
        "{{ $now := Now }}\n"
        "conditions:\n"
        '- lastTransitionTime: {{ $now | Quote }}\n  status: "True"\n  type: Ready\n'
        '- lastTransitionTime: {{ $now | Quote }}\n  status: "True"\n  type: ContainersReady\n'
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: true\n  restartCount: 0\n"
        "  started: true\n  state: {running: {startedAt: {{ $now | Quote }}}}\n"
        "{{ end }}\n"
    ),
)
"""A held pod whose annotation says ``released`` turns Ready. A released pod that an image patch restarted in place is
left to the in-place stages: were this stage to match it too, kwok could pick either, and this one would write it
Ready at once with a restart count of 0, so the restart would vanish from the pod's status before a controller saw
it."""


def _inplace_ready_stage(delay_ms: int) -> dict[str, Any]:
    stage = _pod_stage(
        "pod-inplace-ready",
        "Running",
        [
            {"key": _RESTARTED_QUERY, "operator": "Exists"},
            {"key": _IMAGE_DRIFT_QUERY, "operator": "DoesNotExist"},
            {"key": _BAD_IMAGE_QUERY, "operator": "DoesNotExist"},
        ],
        (
            "{{ $now := Now }}\n"
            "conditions:\n"
            '- lastTransitionTime: {{ $now | Quote }}\n  status: "True"\n  type: Ready\n'
            '- lastTransitionTime: {{ $now | Quote }}\n  status: "True"\n  type: ContainersReady\n'
            "containerStatuses:\n"
            "{{ range .status.containerStatuses }}\n"
            "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: true\n"
            "  restartCount: {{ .restartCount }}\n  started: true\n"
            "  lastState: {terminated: {exitCode: 0, reason: Completed}}\n"
            "  state: {running: {startedAt: {{ $now | Quote }}}}\n"
            "{{ end }}\n"
        ),
    )
    if delay_ms:
        stage["spec"]["delay"] = {"durationMilliseconds": delay_ms}
    return stage


def stage_documents(stages_dir: Path, *, pod_ready_delay_ms: int, inplace_ready_delay_ms: int) -> list[Any]:
    """Every stage document kwok is to play (module docstring), the stock ones read from ``stages_dir``."""
    docs: list[Any] = []
    for name in _KWOK_STAGES:
        for doc in yaml.safe_load_all((stages_dir / name).read_text()):
            if not doc:
                continue
            if doc.get("metadata", {}).get("name") == "pod-ready":
                # Pods with a bad image never become ready (see BAD_IMAGE_PREFIX); others after the delay.
                doc["spec"]["selector"]["matchExpressions"].append(
                    {"key": _BAD_IMAGE_QUERY, "operator": "DoesNotExist"}
                )
                if pod_ready_delay_ms:
                    doc["spec"]["delay"] = {"durationMilliseconds": pod_ready_delay_ms}
                docs.append(_held_ready_stage(doc))
                doc["spec"]["selector"]["matchExpressions"].append(
                    {"key": _HOLD_READY_QUERY, "operator": "NotIn", "values": [HOLD_READY]}
                )
            if doc.get("metadata", {}).get("name") == "pod-delete":
                doc["spec"]["selector"]["matchExpressions"].append(_NOT_FORCE_DELETED)
            docs.append(doc)
    docs.append(_BAD_IMAGE_STAGE)
    docs.append(_RELEASE_READY_STAGE)
    docs.append(_INPLACE_RESTART_STAGE)
    docs.append(_inplace_ready_stage(pod_ready_delay_ms + inplace_ready_delay_ms))
    return docs
