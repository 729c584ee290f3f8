"""Every label and annotation key kthena_py reads or writes, each spelled once.

Guarantees:

* Kthena's keys are byte-identical to Kthena's (modelserving.md §1-§2, modelbooster.md §3,
  router-contract.md §3), so existing selectors, PD group keys and Volcano integrations keep working.
* Keys under ``*.kthena-py.io/`` are ours: Kthena never reads them.
* Keys are written out whole (never built from a prefix), so a search for a key finds its one definition; the
  two families whose key ends with a name (:data:`MODELPOOL_DEMAND_PREFIX`, :data:`ADAPTER_LABEL_PREFIX`) are
  spelled once as their prefix.
"""

from __future__ import annotations

__all__ = [
    "ACTIVATOR_FIELD_MANAGER",
    "ACTIVATOR_HOLD_BUDGET",
    "ACTIVATOR_MODEL",
    "ACTIVATOR_PORT",
    "ACTIVATOR_SCALED_TO_ZERO",
    "ACTIVATOR_SCALE_FROM_ZERO",
    "ACTIVATOR_STATE",
    "ADAPTERS_FIELD_MANAGER",
    "ADAPTER_LABEL_PREFIX",
    "AUTOSCALING_HISTORY",
    "BOOSTER_BACKEND_NAME",
    "BOOSTER_MANAGED_BY",
    "BOOSTER_MANAGED_BY_VALUE",
    "BOOSTER_MIGRATED",
    "BOOSTER_MODEL_NAME",
    "BOOSTER_MODEL_UID",
    "BOOSTER_PREFETCH",
    "BOOSTER_PREFETCH_NODE_SELECTOR",
    "BOOSTER_REPLICAS",
    "BOOSTER_REVISION",
    "ENTRY_VALUE",
    "IMPORTED_FROM",
    "IMPORTED_KIND",
    "IMPORTED_NAME",
    "IMPORTED_PEER",
    "KUBECTL_LAST_APPLIED",
    "LORA_ADAPTERS",
    "LORA_ENDPOINT",
    "LORA_LOADING",
    "LORA_PORT",
    "LORA_RESTARTS",
    "LWS_GROUP_INDEX",
    "LWS_GROUP_KEY",
    "LWS_NAME",
    "LWS_WORKER_INDEX",
    "MODELPOOL_DEMAND_PREFIX",
    "MODELPOOL_FIELD_MANAGER",
    "MODELPOOL_RELEASED_PREFIX",
    "MODEL_CACHE",
    "MODEL_CACHE_ATTEMPT",
    "MODEL_CACHE_CONTENT",
    "MODEL_CACHE_FINALIZER",
    "MODEL_CACHE_FINGERPRINT",
    "MODEL_CACHE_JOB_KIND",
    "MODEL_CACHE_NAME",
    "MODEL_CACHE_NODE",
    "NODE_OS",
    "POD_DELETION_COST",
    "SERVING_ENTRY",
    "SERVING_GROUP_NAME",
    "SERVING_INPLACE_UPDATE_STATE",
    "SERVING_NAME",
    "SERVING_REVISION",
    "SERVING_ROLE",
    "SERVING_ROLE_ID",
    "SERVING_ROLE_TEMPLATE_HASH",
    "SHARD_CUTS",
    "SHARD_GROUP",
    "SHARD_ROLE",
    "SHARD_SLOTS",
    "VOLCANO_PODGROUP",
    "VOLCANO_QUEUE",
    "VOLCANO_TASK_SPEC",
]

# Kthena's ModelServing: labels on pods, Services, PodGroups and ControllerRevisions.
SERVING_NAME = "modelserving.volcano.sh/name"
SERVING_GROUP_NAME = "modelserving.volcano.sh/group-name"
SERVING_ROLE = "modelserving.volcano.sh/role"
SERVING_ROLE_ID = "modelserving.volcano.sh/role-id"
SERVING_REVISION = "modelserving.volcano.sh/revision"
SERVING_ROLE_TEMPLATE_HASH = "modelserving.volcano.sh/role-template-hash"
SERVING_ENTRY = "modelserving.volcano.sh/entry"
ENTRY_VALUE = "true"
"""The value of :data:`SERVING_ENTRY` on entry pods."""
SERVING_INPLACE_UPDATE_STATE = "modelserving.volcano.sh/inplace-update-state"
"""Pod annotation: the record of an in-place update (ours, under Kthena's prefix)."""

# Kthena's ModelBooster: the five labels of every child.
BOOSTER_MODEL_NAME = "workload.serving.volcano.sh/model-name"
BOOSTER_BACKEND_NAME = "workload.serving.volcano.sh/backend-name"
BOOSTER_MANAGED_BY = "workload.serving.volcano.sh/managed-by"
BOOSTER_REVISION = "workload.serving.volcano.sh/revision"
BOOSTER_MODEL_UID = "workload.serving.volcano.sh/model-uid"
BOOSTER_MANAGED_BY_VALUE = "workload.serving.volcano.sh"
"""The value of :data:`BOOSTER_MANAGED_BY` (the API group)."""

# Volcano: pod and PodGroup annotations, the ModelServing's queue annotation.
VOLCANO_PODGROUP = "scheduling.k8s.io/group-name"
VOLCANO_TASK_SPEC = "volcano.sh/task-spec"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"

# Kubernetes.
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
KUBECTL_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
NODE_OS = "kubernetes.io/os"
"""The well-known node label of the operating system (``linux``)."""

# LeaderWorkerSet: the labels the LWS plugin sets for engines that expect them.
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"

# Ours.
BOOSTER_REPLICAS = "modelbooster.kthena-py.io/replicas"
"""On the ModelServing: the replica counts the booster asked for when it last wrote them (JSON).

Lets the controller tell a change of the booster's replicas (applied) from a change made through the scale
subresource or by an autoscaler (kept)."""
BOOSTER_MIGRATED = "modelbooster.kthena-py.io/migrated"
"""On the ModelBooster: set by ``kthena-py modelbooster migrate``; the controller leaves such a booster alone."""
AUTOSCALING_HISTORY = "autoscaling.kthena-py.io/history"

# Sharded replicas (ours): the Leases of a lease group (kthena_py.runtime.shards).
SHARD_GROUP = "shards.kthena-py.io/group"
"""Label of every Lease of a shard group (the members' and the slot map's); value: the group name."""
SHARD_ROLE = "shards.kthena-py.io/role"
"""Label of a shard group's Lease: ``member`` (one replica's) or ``slots`` (the slot map)."""
SHARD_SLOTS = "shards.kthena-py.io/slots"
"""Annotation of the slot-map Lease: JSON, slot number (as a string) to owner member id."""
SHARD_CUTS = "shards.kthena-py.io/cuts"
"""Annotation of the slot-map Lease (``--shard-informers``): JSON, the raw-hash cut points in force, their
generation and a pending recut (kthena_py.runtime.shards.cutstate)."""

# Test support (ours): the nodes a mini-kubelet serves (kthena_py.testing.kubelet).
MINI_KUBELET = "kthena-py.io/mini-kubelet"
"""Label (value: the node name) and taint key (``true:NoSchedule``) of a node whose pods run as local processes."""

# ModelCache (ours): the annotation that gates a ModelServing, the booster's opt-in, the cache's children.
MODEL_CACHE = "serving.kthena-py.io/model-cache"
"""On a ModelServing: the name of the ModelCache (same namespace) its pods wait for and mount read-only."""
# The activator (scale from zero): ModelServing annotations it reads.
ACTIVATOR_MODEL = "activator.kthena-py.io/model"
"""Comma-separated model names a ModelServing answers to in the activator (default: its own name)."""
ACTIVATOR_PORT = "activator.kthena-py.io/port"
"""The entry pods' serving port (default: the entry template's first containerPort)."""
ACTIVATOR_SCALE_FROM_ZERO = "activator.kthena-py.io/scale-from-zero"
"""``"true"``: the activator may wake the ModelServing from zero (also implied by an AutoscalingPolicy with
``minReplicas: 0`` bound to it)."""
ACTIVATOR_HOLD_BUDGET = "activator.kthena-py.io/hold-budget"
"""How long the activator holds a request for this ModelServing (a duration, e.g. ``120s``)."""
ACTIVATOR_FIELD_MANAGER = "kthena-py-activator"
"""The field manager of the activator's writes (scale 0 -> 1, and its state annotation)."""
ACTIVATOR_SCALED_TO_ZERO = "scaled to zero (activator)"
"""The value of :data:`ACTIVATOR_STATE` (and the words of ``kthena-py status``) for a ModelServing at zero."""
ACTIVATOR_STATE = "activator.kthena-py.io/state"
"""Written by the activator on a ModelServing it would wake: ``scaled to zero (activator)`` while opted in and at
zero replicas, absent otherwise (shown by ``kubectl get ms`` in the ``Activator`` column)."""

# ModelPool (ours): several ModelServings sharing GPU slots, swapped on demand.
MODELPOOL_DEMAND_PREFIX = "demand.modelpool.kthena-py.io/"
"""On a ModelPool, one annotation per member: ``demand.modelpool.kthena-py.io/<member ModelServing name>``, the time
(RFC 3339, UTC, milliseconds) of the latest request an activator saw for that member. Written by activators
(merge patch, rate-limited, refreshed while requests are held); read by the pool controller as demand and recency."""
MODELPOOL_FIELD_MANAGER = "kthena-py-modelpool"
"""The field manager of the pool controller: the only writer of a pool member's ``spec.replicas``."""
MODELPOOL_RELEASED_PREFIX = "released.modelpool.kthena-py.io/"
"""On a ModelPool, one annotation per member the pool controller swapped out: the time (same format as the demand)
it was drained. Demand recorded before it was served by the then-resident member, so it asks for no swap back."""

# LoRA adapters (ours): a desired adapter set on a ModelServing, loaded into its Ready entry pods.
LORA_ADAPTERS = "serving.kthena-py.io/lora-adapters"
"""On a ModelServing: a JSON list of ``{"name", "source"}`` (``url`` accepted for ``source``, KubeAI's spelling),
the adapters every Ready entry pod keeps loaded."""
LORA_ENDPOINT = "serving.kthena-py.io/lora-endpoint"
"""On a ModelServing: which load endpoint the adapter reconciler calls, ``sidecar`` (Kthena's runtime sidecar,
the default) or ``engine`` (the engine's own ``/v1/load_lora_adapter``)."""
LORA_PORT = "serving.kthena-py.io/lora-port"
"""On a ModelServing: the port of that endpoint (default: 8100, Kthena's ``RUNTIME_PORT``, for the sidecar; the
activator's serving port for the engine)."""
ADAPTER_LABEL_PREFIX = "adapter.kthena-py.io/"
"""On an entry pod, one label per loaded adapter: ``adapter.kthena-py.io/<adapter name>``, its value the digest
of the source that was loaded (:func:`kthena_py.plan.adapters.desired.source_digest`)."""
ADAPTERS_FIELD_MANAGER = "kthena-py-adapters"
"""The field manager of the adapter reconciler's writes (pod labels, the ModelServing's condition)."""
LORA_LOADING = "serving.kthena-py.io/lora-loading"
"""On an entry pod: the adapter loads the reconciler has started and not yet seen finish, a JSON object
``{"<name>": {"digest": "<source digest>", "since": <epoch seconds>}}``, written before the load request is sent, so
a restarted manager waits for a load already under way instead of sending it twice."""
LORA_RESTARTS = "serving.kthena-py.io/lora-restarts"
"""On an entry pod: the total container restart count when its adapter labels were last written; a pod whose
count moved since has lost its adapters (the engine restarted), so its labels are dropped and the set reloaded."""

# Importers (ours): where a translated object came from (``kthena-py import``).
IMPORTED_PEER = "import.kthena-py.io/peer"
"""Label on every object ``kthena-py import`` writes: the peer system it came from, ``kubeai`` or ``llmkube``."""
IMPORTED_KIND = "import.kthena-py.io/kind"
"""Label: the kind of the peer object it was translated from (``Model``, ``InferenceService``, ``ModelPool``)."""
IMPORTED_NAME = "import.kthena-py.io/name"
"""Label: the name of the peer object it was translated from (same namespace unless ``--namespace`` moved it)."""
IMPORTED_FROM = "import.kthena-py.io/from"
"""Annotation: the peer object in full, ``<apiVersion> <Kind> <namespace>/<name>``."""

BOOSTER_PREFETCH = "modelbooster.kthena-py.io/prefetch"
"""On a ModelBooster: ``"true"`` renders a child ModelCache per backend and gates the backend's ModelServing on it
instead of Kthena's per-pod downloader init container."""
BOOSTER_PREFETCH_NODE_SELECTOR = "modelbooster.kthena-py.io/prefetch-node-selector"
"""On a prefetching ModelBooster with a ``hostpath://`` cacheURI: ``key=value,...``, the nodes its node-local
ModelCache is staged on (default: every Linux node)."""
MODEL_CACHE_NAME = "modelcache.serving.kthena-py.io/name"
"""On a cache's Jobs, PodGroups and claims: the ModelCache's name."""
MODEL_CACHE_FINGERPRINT = "modelcache.serving.kthena-py.io/fingerprint"
"""On a download Job: the fingerprint of the spec it stages (source, revision, files, digests, storage)."""
MODEL_CACHE_NODE = "modelcache.serving.kthena-py.io/node"
"""On a node-local cache's Job: the node it stages onto (an annotation with the node's name; the label of the same
key holds it too, hash-shortened when longer than a label value may be)."""
MODEL_CACHE_JOB_KIND = "modelcache.serving.kthena-py.io/job"
"""On a cache's Jobs: ``download`` or ``cleanup``."""
MODEL_CACHE_ATTEMPT = "modelcache.serving.kthena-py.io/attempt"
"""On a download Job: which attempt at its fingerprint it is (0, 1, ...); retries count from the Jobs themselves."""
MODEL_CACHE_CONTENT = "modelcache.serving.kthena-py.io/content"
"""On a re-staging download Job (``refreshPolicy: OnChange``): the 8-hex token of the source identity it stages
into ``<model_dir>-<token>``; absent on the first staging (Kthena's ``model_dir``)."""
MODEL_CACHE_FINALIZER = "modelcache.serving.kthena-py.io/cleanup"
"""The finalizer that removes a cache's files before the ModelCache goes (bounded: it never sticks)."""
