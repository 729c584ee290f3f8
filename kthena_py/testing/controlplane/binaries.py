"""Locate the control-plane binaries built by ``hack/build-controlplane.sh``.

Guarantees:

* The versions default to the same values as the build script (``K8S_VERSION``, ``ETCD_VERSION``,
  ``KWOK_VERSION``, ``VOLCANO_VERSION``, ``VOLCANO_APIS_VERSION``) and are overridable by the same
  environment variables.
* The cache directory is resolved exactly like the build script does:
  ``$KTHENA_PY_BIN_CACHE``, else ``$XDG_CACHE_HOME/kthena-py/bin``, else ``~/.cache/kthena-py/bin``.
* The build script keys every output directory by the Go version too (``etcd-v3.6.16-go1.26.8``).
  Python cannot know which Go built them, so the newest complete directory of the wanted component
  version wins, unless ``KTHENA_PY_GO_VERSION`` (e.g. ``go1.26.8``) pins one.
* A missing binary raises :class:`BinariesNotFoundError`, whose message names the exact paths that
  were searched and the ``hack/build-controlplane.sh`` command that builds them. Nothing is ever
  downloaded or built from here.
* The tools the tests drive (:func:`find_kubectl`, :func:`find_helm`) are found the same way: kubectl of
  the control plane's Kubernetes version and the pinned helm, both built from Go modules by the build
  script, never whatever happens to be on ``PATH``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_ETCD_VERSION",
    "DEFAULT_HELM_VERSION",
    "DEFAULT_K8S_VERSION",
    "DEFAULT_KWOK_VERSION",
    "DEFAULT_VOLCANO_APIS_VERSION",
    "DEFAULT_VOLCANO_VERSION",
    "BinariesNotFoundError",
    "ClusterBinaries",
    "EnvTestBinaries",
    "cache_dir",
    "find_cluster_binaries",
    "find_envtest_binaries",
    "find_helm",
    "find_kubectl",
]

DEFAULT_K8S_VERSION = "1.36.3"
DEFAULT_ETCD_VERSION = "3.6.16"
DEFAULT_KWOK_VERSION = "0.8.0"
DEFAULT_VOLCANO_VERSION = "1.14.1"
DEFAULT_VOLCANO_APIS_VERSION = "1.14.0"
"""The ``volcano.sh/apis`` module version vc-scheduler is built with (part of its cache key)."""
DEFAULT_VOLCANO_APIS_VERSION = "1.14.0"
"""volcano.sh/apis v1.15.x is not served by the module proxy; see hack/build-controlplane.sh."""
DEFAULT_HELM_VERSION = "4.3.2"

_BUILD_SCRIPT = "hack/build-controlplane.sh"


class BinariesNotFoundError(FileNotFoundError):
    """A control-plane binary is missing from the cache directory."""


@dataclass(frozen=True)
class EnvTestBinaries:
    """The binaries of the envtest tier.

    Attributes:
        etcd: Path of the ``etcd`` server.
        kube_apiserver: Path of ``kube-apiserver``.
    """

    etcd: Path
    kube_apiserver: Path


@dataclass(frozen=True)
class ClusterBinaries(EnvTestBinaries):
    """The binaries (and data files) of the cluster tier.

    Attributes:
        kube_controller_manager: Path of ``kube-controller-manager``.
        kwok: Path of the ``kwok`` controller.
        kwok_stages_dir: Directory of the kwok Stage YAML files copied from the kwok module.
        vc_scheduler: Path of Volcano's ``vc-scheduler``.
        volcano_crd_dir: Directory of the Volcano CRD YAML files the scheduler needs.
    """

    kube_controller_manager: Path
    kwok: Path
    kwok_stages_dir: Path
    vc_scheduler: Path
    volcano_crd_dir: Path


def cache_dir() -> Path:
    """Return the binary cache directory, resolved like ``hack/build-controlplane.sh`` does.

    Returns:
        The directory (it may not exist).
    """
    explicit = os.environ.get("KTHENA_PY_BIN_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "kthena-py" / "bin"


def _version(env: str, default: str) -> str:
    return os.environ.get(env) or default


def _component_dir(prefix: str, required: tuple[str, ...], build_arg: str) -> Path:
    """Find ``<cache>/<prefix>-go*`` that holds every ``required`` entry.

    Args:
        prefix: Directory name up to the Go version, e.g. ``etcd-v3.6.16``.
        required: Relative paths that must exist inside the directory.
        build_arg: Component argument of the build script, for the error message.

    Returns:
        The chosen directory.

    Raises:
        BinariesNotFoundError: No complete directory exists.
    """
    root = cache_dir()
    pinned = os.environ.get("KTHENA_PY_GO_VERSION")
    pattern = f"{prefix}-{pinned}" if pinned else f"{prefix}-go*"
    candidates = [
        d
        for d in root.glob(pattern)
        if d.is_dir() and not d.name.endswith(".tmp") and all((d / r).exists() for r in required)
    ]
    if not candidates:
        wanted = ", ".join(str(root / pattern / r) for r in required)
        raise BinariesNotFoundError(
            f"control-plane binaries not found: {wanted}. Build them with "
            f"`{_BUILD_SCRIPT} {build_arg}` from the repository root (cold builds take 20-40 minutes; "
            f"set KTHENA_PY_SKIP_CONTROLPLANE=1 to skip the envtest/cluster tests instead)."
        )
    return max(candidates, key=lambda d: (d.stat().st_mtime, d.name))


def find_envtest_binaries() -> EnvTestBinaries:
    """Locate etcd and kube-apiserver.

    Returns:
        The paths.

    Raises:
        BinariesNotFoundError: One of them has not been built.
    """
    etcd = _component_dir(f"etcd-v{_version('ETCD_VERSION', DEFAULT_ETCD_VERSION)}", ("etcd",), "etcd")
    k8s = _component_dir(
        f"k8s-v{_version('K8S_VERSION', DEFAULT_K8S_VERSION)}",
        ("kube-apiserver", "kube-controller-manager"),
        "kube",
    )
    return EnvTestBinaries(etcd=etcd / "etcd", kube_apiserver=k8s / "kube-apiserver")


def find_cluster_binaries() -> ClusterBinaries:
    """Locate every binary of the cluster tier.

    Returns:
        The paths.

    Raises:
        BinariesNotFoundError: One of them has not been built.
    """
    base = find_envtest_binaries()
    k8s = base.kube_apiserver.parent
    kwok = _component_dir(f"kwok-v{_version('KWOK_VERSION', DEFAULT_KWOK_VERSION)}", ("kwok", "stages"), "kwok")
    volcano = _component_dir(
        f"volcano-v{_version('VOLCANO_VERSION', DEFAULT_VOLCANO_VERSION)}"
        f"-apis-v{_version('VOLCANO_APIS_VERSION', DEFAULT_VOLCANO_APIS_VERSION)}",
        ("vc-scheduler", "crd"),
        "volcano",
    )
    return ClusterBinaries(
        etcd=base.etcd,
        kube_apiserver=base.kube_apiserver,
        kube_controller_manager=k8s / "kube-controller-manager",
        kwok=kwok / "kwok",
        kwok_stages_dir=kwok / "stages",
        vc_scheduler=volcano / "vc-scheduler",
        volcano_crd_dir=volcano / "crd",
    )


def find_kubectl() -> Path:
    """Locate kubectl (the control plane's Kubernetes version).

    Raises:
        BinariesNotFoundError: It has not been built.
    """
    version = _version("K8S_VERSION", DEFAULT_K8S_VERSION)
    return _component_dir(f"kubectl-v{version}", ("kubectl",), "kubectl") / "kubectl"


def find_helm() -> Path:
    """Locate helm.

    Raises:
        BinariesNotFoundError: It has not been built.
    """
    version = _version("HELM_VERSION", DEFAULT_HELM_VERSION)
    return _component_dir(f"helm-v{version}", ("helm",), "helm") / "helm"
