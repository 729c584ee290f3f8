"""A mini-kubelet for the cluster tier: pods bound to a manual node run as local processes.

The cluster tier has no kubelet: kwok fakes the pods of its nodes. For pods that must really run (a Job running
``kthena-py download``, say), :class:`MiniKubelet` serves one :class:`ManualNode` (a Node kwok does not manage,
tainted so that only pods meant for it land there) from a thread of the test process: it watches the pods bound to
the node, runs their init containers then containers as local processes, and reports like a kubelet through the
status subresource (Pending -> Running -> Succeeded/Failed, pod IP, conditions, container states with exit code and
termination message, restarts), and finishes deleted pods (SIGTERM, SIGKILL after the capped grace period, final
delete with a UID precondition).

What is real: the API objects and every write, the scheduler's binding (Volcano or ``spec.nodeName``), the Job and
other controllers reacting to the statuses, the processes, their exit codes, signals, logs and files.

Where the harness bends reality (the one place it does):

* **No images, no mount namespaces.** A container's ``command`` names a local program (:class:`CommandMapper`:
  ``kthena-py``, ``python``/``python3``, ``sh``; or an image's entrypoint given to the mapper); anything else waits
  with ``ErrImagePull``. Volumes are host directories under the kubelet's root (``hostPath`` -> ``root/host/<path>``,
  a claim -> its PV's path under the volume root, ``emptyDir``/``configMap``/``secret`` -> a pod directory), and a
  container sees them only because **arguments and environment values that equal a mountPath or start with
  ``mountPath/``** (also the value of ``--opt=VALUE`` / ``NAME=VALUE`` arguments) are rewritten to the host path,
  longest mountPath first (:class:`MountTable`); the host program the mapper puts first is never rewritten. Paths
  inside scripts or shell lines are not rewritten: pass them as arguments or env. ``subPath`` is honoured;
  ``readOnly`` is **not enforced**. ``terminationMessagePath`` is mapped the same way onto a per-container file
  read after exit; ``workingDir`` is mapped or a per-container directory.
* No probes (a running container is ready), no resource limits, no image pulls, no service links; the process
  inherits only ``PATH`` (``HOME`` is its working directory, ``HOSTNAME`` the pod name) plus its resolved env.
* Pod IPs are leased from 127.100.250.0/24 on loopback (so a process may bind its pod IP); the node IP is 127.0.0.1.

Typical use (the ``mini_kubelet`` fixture of ``test/cluster/conftest.py`` does this)::

    with MiniKubelet(cluster.kubeconfig_path, "mk-node", tmp_path) as kubelet:
        pod_spec.update(kubelet.placement())      # nodeSelector + toleration
        ...
        kubelet.container_log(namespace, pod_name, "main")
"""

from kthena_py.testing.kubelet.env import ContainerConfigError, env_sources, expand, resolve_env
from kthena_py.testing.kubelet.kubelet import SHARED_POD_IPS, MiniKubelet
from kthena_py.testing.kubelet.node import (
    DEFAULT_POD_IP_RANGE,
    MINI_KUBELET_LABEL,
    MINI_KUBELET_TAINT,
    NODE_IP,
    ManualNode,
    PodIPPool,
    hostpath_volume,
)
from kthena_py.testing.kubelet.paths import Mount, MountTable, host_path_for
from kthena_py.testing.kubelet.runner import DEFAULT_PROGRAMS, CommandMapper, ContainerRunner, LocalCommand

__all__ = [
    "DEFAULT_POD_IP_RANGE",
    "DEFAULT_PROGRAMS",
    "MINI_KUBELET_LABEL",
    "MINI_KUBELET_TAINT",
    "NODE_IP",
    "SHARED_POD_IPS",
    "CommandMapper",
    "ContainerConfigError",
    "ContainerRunner",
    "LocalCommand",
    "ManualNode",
    "MiniKubelet",
    "Mount",
    "MountTable",
    "PodIPPool",
    "env_sources",
    "expand",
    "host_path_for",
    "hostpath_volume",
    "resolve_env",
]
