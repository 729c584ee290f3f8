"""Descriptors of the resource types the project talks to.

Guarantees: a :class:`ResourceType` is enough to build every REST path of its kind (collection,
object, subresource, watch), for core, built-in and custom resources alike, without discovery. Equal descriptors
hash alike (the hash of their fields, computed once per descriptor).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ResourceType:
    """A group/version/kind with its plural resource name and scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    def __hash__(self) -> int:
        # Types key the caches' dicts on every lookup: the fields' hash is computed once per descriptor.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.group, self.version, self.kind, self.plural, self.namespaced))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` string objects of this type carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvk(self) -> str:
        """A readable ``group/version, Kind=kind`` identifier, as client-go prints it."""
        return f"{self.api_version}, Kind={self.kind}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path for the collection, one object, or one of its subresources.

        Args:
            namespace: Namespace for namespaced types; ``None`` means all namespaces.
            name: Object name; ``None`` for the collection.
            subresource: ``status``, ``scale``, ... (needs ``name``).

        Returns:
            A path starting with ``/api`` or ``/apis``.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = ResourceType("", "v1", "Pod", "pods")
SERVICES = ResourceType("", "v1", "Service", "services")
CONFIGMAPS = ResourceType("", "v1", "ConfigMap", "configmaps")
SECRETS = ResourceType("", "v1", "Secret", "secrets")
EVENTS = ResourceType("", "v1", "Event", "events")
NAMESPACES = ResourceType("", "v1", "Namespace", "namespaces", namespaced=False)
NODES = ResourceType("", "v1", "Node", "nodes", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "Lease", "leases")
CONTROLLER_REVISIONS = ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions")
CRDS = ResourceType(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False
)
VALIDATING_WEBHOOKS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    namespaced=False,
)
MUTATING_WEBHOOKS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    namespaced=False,
)
PERSISTENT_VOLUME_CLAIMS = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
JOBS = ResourceType("batch", "v1", "Job", "jobs")
PODGROUPS = ResourceType("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
QUEUES = ResourceType("scheduling.volcano.sh", "v1beta1", "Queue", "queues", namespaced=False)
PRIORITY_CLASSES = ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False)
