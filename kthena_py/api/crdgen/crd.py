"""Assemble the CustomResourceDefinitions: Kthena's three kinds and the kinds of kthena_py's own group.

Kthena's kinds (ModelServing, AutoscalingPolicy, ModelBooster) are served in ``workload.serving.volcano.sh``;
kinds of our own (ModelCache, ModelPool) in ``serving.kthena-py.io`` (:attr:`KindSpec.group`), never in Kthena's group.

Guarantees: :func:`build_crds` is deterministic and pure (the vendored data is package data); each CRD has
the full schema of :func:`kthena_py.api.crdgen.schema.kind_schema`, a ``status`` subresource, printer columns,
short names and the ``kthena`` category; ModelServing also has the ``scale`` subresource (``spec.replicas``,
``status.replicas``, ``status.labelSelector``) so ``kubectl scale``, HPA and KEDA work. :func:`render_yaml`
renders the files under ``manifests/crd/`` byte for byte.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import yaml

from kthena_py.api.autoscaling import AutoscalingPolicy
from kthena_py.api.common import (
    AUTOSCALING_POLICY_KIND,
    AUTOSCALING_POLICY_LIST_KIND,
    AUTOSCALING_POLICY_PLURAL,
    GROUP,
    MODEL_BOOSTER_KIND,
    MODEL_BOOSTER_LIST_KIND,
    MODEL_BOOSTER_PLURAL,
    MODEL_SERVING_KIND,
    MODEL_SERVING_LIST_KIND,
    MODEL_SERVING_PLURAL,
    VERSION,
    ApiObject,
)
from kthena_py.api.crdgen.k8s import kubernetes_version
from kthena_py.api.crdgen.schema import kind_schema
from kthena_py.api.modelbooster import MODEL_BOOSTER_DEPRECATION_WARNING, ModelBooster
from kthena_py.api.modelcache import (
    MODEL_CACHE_GROUP,
    MODEL_CACHE_KIND,
    MODEL_CACHE_LIST_KIND,
    MODEL_CACHE_PLURAL,
    MODEL_CACHE_VERSION,
    ModelCache,
)
from kthena_py.api.modelpool import (
    MODEL_POOL_GROUP,
    MODEL_POOL_KIND,
    MODEL_POOL_LIST_KIND,
    MODEL_POOL_PLURAL,
    MODEL_POOL_SHORT_NAME,
    MODEL_POOL_VERSION,
    ModelPool,
)
from kthena_py.api.modelserving import ModelServing
from kthena_py.vocab.conditions import ACTIVE, SCHEDULED
from kthena_py.vocab.labels import ACTIVATOR_STATE

__all__ = ["KIND_SPECS", "KindSpec", "build_crd", "build_crds", "file_name", "render_yaml", "rendered_crds"]

CRD = dict[str, Any]

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True)
class KindSpec:
    """How one kind is published.

    Attributes:
        model: The pydantic model of the kind.
        kind: The kind, e.g. ``ModelServing``.
        list_kind: The list kind.
        plural: The resource name.
        short_names: ``kubectl`` abbreviations.
        printer_columns: ``additionalPrinterColumns`` (``Age`` is appended).
        scale: Whether the kind has a ``scale`` subresource.
        deprecation_warning: Marks the kind's version deprecated; the API server sends this warning with every
            request for the kind.
        group: The API group (Kthena's by default; kthena_py's own kinds name theirs).
        version: The served (and stored) version.
    """

    model: type[ApiObject]
    kind: str
    list_kind: str
    plural: str
    short_names: tuple[str, ...]
    printer_columns: tuple[dict[str, Any], ...] = field(default=())
    scale: bool = False
    deprecation_warning: str | None = None
    group: str = GROUP
    version: str = VERSION

    @property
    def singular(self) -> str:
        """The singular resource name (the lower-cased kind)."""
        return self.kind.lower()


KIND_SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        ModelServing,
        MODEL_SERVING_KIND,
        MODEL_SERVING_LIST_KIND,
        MODEL_SERVING_PLURAL,
        ("ms",),
        (
            {
                "name": "Replicas",
                "type": "integer",
                "jsonPath": ".spec.replicas",
                "description": "Desired ServingGroups",
            },
            {
                "name": "Available",
                "type": "integer",
                "jsonPath": ".status.availableReplicas",
                "description": "ServingGroups that are ready",
            },
            {
                "name": "Updated",
                "type": "integer",
                "jsonPath": ".status.updatedReplicas",
                "description": "ServingGroups on the current revision",
            },
            {
                "name": "Placement",
                "type": "string",
                "jsonPath": f'.status.conditions[?(@.type=="{SCHEDULED}")].reason',
                "description": "What the pods wait for (AllScheduled once every pod is placed)",
            },
            {
                # Ours: kept by a running activator (kthena_py.activator.marker); dots in the key are escaped.
                "name": "Activator",
                "type": "string",
                "jsonPath": ".metadata.annotations." + ACTIVATOR_STATE.replace(".", "\\."),
                "description": "What a running activator does for it (scaled to zero (activator): woken on demand)",
            },
            {
                "name": "Current",
                "type": "integer",
                "jsonPath": ".status.currentReplicas",
                "priority": 1,
                "description": "ServingGroups on the current (not yet updated) revision",
            },
            {
                "name": "Revision",
                "type": "string",
                "jsonPath": ".status.updateRevision",
                "priority": 1,
                "description": "Revision the spec asks for",
            },
        ),
        scale=True,
    ),
    KindSpec(
        AutoscalingPolicy,
        AUTOSCALING_POLICY_KIND,
        AUTOSCALING_POLICY_LIST_KIND,
        AUTOSCALING_POLICY_PLURAL,
        ("asp",),
        (
            # Recursive descent finds the one target of a homogeneous or disaggregated policy; the API server
            # prints the first match, so a heterogeneous policy shows its first param's target and a
            # disaggregated one its first role's replicas.
            {
                "name": "Target",
                "type": "string",
                "jsonPath": ".spec..targetRef.name",
                "description": "The ModelServing scaled (the first one of a heterogeneous target)",
            },
            {
                "name": "Current",
                "type": "integer",
                "jsonPath": ".status..currentReplicas",
                "description": "Replicas now (the first role or target of a multi-unit policy)",
            },
            {
                "name": "Desired",
                "type": "integer",
                "jsonPath": ".status..desiredReplicas",
                "description": "Replicas the last pass asked for (the first role or target of a multi-unit policy)",
            },
            {
                "name": "Mode",
                "type": "string",
                "jsonPath": ".status..mode",
                "description": "Stable or Panic",
            },
            {
                "name": "Tolerance",
                "type": "integer",
                "jsonPath": ".spec.tolerancePercent",
                "priority": 1,
                "description": "Tolerated deviation in percent",
            },
        ),
    ),
    KindSpec(
        ModelBooster,
        MODEL_BOOSTER_KIND,
        MODEL_BOOSTER_LIST_KIND,
        MODEL_BOOSTER_PLURAL,
        ("mb",),
        (
            {
                "name": ACTIVE,
                "type": "string",
                "jsonPath": f".status.conditions[?(@.type=='{ACTIVE}')].status",
                "description": "Whether the ModelBooster is active",
            },
        ),
        deprecation_warning=MODEL_BOOSTER_DEPRECATION_WARNING,
    ),
    KindSpec(
        ModelCache,
        MODEL_CACHE_KIND,
        MODEL_CACHE_LIST_KIND,
        MODEL_CACHE_PLURAL,
        ("mcache",),
        (
            {
                "name": "Phase",
                "type": "string",
                "jsonPath": ".status.phase",
                "description": "Pending, Downloading, Ready or Failed",
            },
            {
                "name": "Size",
                "type": "string",
                "jsonPath": ".status.size",
                "description": "Size of the staged files",
            },
            {
                "name": "Progress",
                "type": "string",
                "jsonPath": ".status.progress.percent",
                "description": "How far the running download is",
            },
            {
                "name": "Path",
                "type": "string",
                "jsonPath": ".status.path",
                "priority": 1,
                "description": "Where the model is (claim and directory, or node-local directory)",
            },
            {
                "name": "Revision",
                "type": "string",
                "jsonPath": ".status.revision",
                "priority": 1,
                "description": "The source revision staged",
            },
        ),
        group=MODEL_CACHE_GROUP,
        version=MODEL_CACHE_VERSION,
    ),
    KindSpec(
        ModelPool,
        MODEL_POOL_KIND,
        MODEL_POOL_LIST_KIND,
        MODEL_POOL_PLURAL,
        (MODEL_POOL_SHORT_NAME,),
        (
            {
                "name": "Resident",
                "type": "string",
                "jsonPath": ".status.residentMember",
                "description": "The resident member (with several slots: the one made resident last)",
            },
            {
                "name": "Pending",
                "type": "string",
                "jsonPath": ".status.pendingMember",
                "description": "The member the swap in progress brings in",
            },
            {
                "name": "Phase",
                "type": "string",
                "jsonPath": ".status.phase",
                "description": "Pending, Ready, Swapping or Degraded",
            },
            {
                "name": "Slots",
                "type": "integer",
                "jsonPath": ".spec.slots",
                "description": "How many members may be resident at once",
            },
        ),
        group=MODEL_POOL_GROUP,
        version=MODEL_POOL_VERSION,
    ),
)


def file_name(spec: KindSpec) -> str:
    """The file the CRD is written to, e.g. ``workload.serving.volcano.sh_modelservings.yaml``."""
    return f"{spec.group}_{spec.plural}.yaml"


def build_crd(spec: KindSpec) -> CRD:
    """Build the CRD of one kind.

    Args:
        spec: The kind's publishing settings (one of :data:`KIND_SPECS`).

    Returns:
        The ``apiextensions.k8s.io/v1`` CustomResourceDefinition as a dict.
    """
    subresources: dict[str, Any] = {"status": {}}
    if spec.scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector",
        }
    version: dict[str, Any] = {
        "name": spec.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": kind_schema(spec.model)},
        "subresources": subresources,
        "additionalPrinterColumns": [*spec.printer_columns, _AGE],
    }
    if spec.deprecation_warning:
        # Each CRD serves one kind, so deprecating its version deprecates the kind alone.
        version["deprecated"] = True
        version["deprecationWarning"] = spec.deprecation_warning
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{spec.plural}.{spec.group}"},
        "spec": {
            "group": spec.group,
            "names": {
                "kind": spec.kind,
                "listKind": spec.list_kind,
                "plural": spec.plural,
                "singular": spec.singular,
                "shortNames": list(spec.short_names),
                "categories": ["kthena"],
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def build_crds() -> dict[str, CRD]:
    """Build every CRD, keyed by its file name under ``manifests/crd/``."""
    return {file_name(spec): build_crd(spec) for spec in KIND_SPECS}


class _Dumper(yaml.SafeDumper):
    """A SafeDumper that writes multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


@functools.cache
def rendered_crds() -> dict[str, str]:
    """Every CRD rendered by :func:`render_yaml`, keyed by file name (computed once per process)."""
    return {name: render_yaml(crd) for name, crd in build_crds().items()}


def render_yaml(crd: CRD) -> str:
    """Render a CRD as the YAML file committed under ``manifests/crd/``.

    Args:
        crd: A CRD from :func:`build_crd`.

    Returns:
        A comment naming the generator and the Kubernetes version of the embedded schemas, then the YAML.
    """
    header = (
        "# Generated by `kthena-py crds` from kthena_py's API models (embedded Kubernetes schemas: "
        f"{kubernetes_version()}). Do not edit.\n"
    )
    body = yaml.dump(crd, Dumper=_Dumper, sort_keys=True, width=120, allow_unicode=True, default_flow_style=False)
    return header + body
