"""Which host directory stands in for each of a pod's volumes, and each container's mounts (pure).

* ``hostPath`` -> the path under the node's host root (:func:`~.paths.host_path_for`);
* ``persistentVolumeClaim`` -> the bound PV's ``hostPath``/``local`` path under the volume root (shared by every
  mini-kubelet of a test, like network storage), so two pods using one claim see the same files; the caller
  resolves claim -> path (:data:`ClaimPaths`);
* ``emptyDir`` -> a directory of the pod; ``configMap``/``secret`` -> a directory of the pod the caller fills.

Each volumeMount becomes a :class:`~.paths.Mount` (``subPath`` appended, ``readOnly`` recorded, not enforced),
plus one for the container's ``terminationMessagePath`` (default ``/dev/termination-log``) onto a host file.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kthena_py.testing.kubelet.paths import Mount, host_path_for

__all__ = [
    "DEFAULT_TERMINATION_MESSAGE_PATH",
    "FILE_VOLUME_KINDS",
    "ClaimPaths",
    "VolumeError",
    "container_mounts",
    "volume_dirs",
]

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
FILE_VOLUME_KINDS = ("configMap", "secret")
"""Volume kinds whose files the caller writes into the directory :func:`volume_dirs` gives them."""

ClaimPaths = Mapping[str, str]
"""Claim name -> the node path of the PersistentVolume it is bound to."""


class VolumeError(Exception):
    """A volume cannot be set up (unsupported kind, unknown claim, missing volume)."""


def volume_dirs(
    pod: Mapping[str, Any], *, host_root: Path, volume_root: Path, pod_dir: Path, claims: ClaimPaths
) -> dict[str, Path]:
    """The host directory of each volume of ``pod``.

    Args:
        pod: The pod.
        host_root: The node's root for ``hostPath`` volumes.
        volume_root: The root for PersistentVolume paths.
        pod_dir: The pod's own directory (for ``emptyDir``, ``configMap`` and ``secret``).
        claims: Claim name -> bound PV path, for the claims the pod uses.

    Returns:
        Volume name -> host path.

    Raises:
        VolumeError: A volume kind is not supported or a claim is not in ``claims``.
    """
    result: dict[str, Path] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = str(volume["name"])
        if "hostPath" in volume:
            result[name] = host_path_for(host_root, str(volume["hostPath"].get("path", "/")))
        elif "persistentVolumeClaim" in volume:
            claim = str(volume["persistentVolumeClaim"].get("claimName", ""))
            if claim not in claims:
                raise VolumeError(f'volume "{name}": persistentvolumeclaim "{claim}" is not bound')
            result[name] = host_path_for(volume_root, claims[claim])
        elif "emptyDir" in volume or any(kind in volume for kind in FILE_VOLUME_KINDS):
            result[name] = pod_dir / "volumes" / name
        else:
            kinds = sorted(k for k in volume if k != "name")
            raise VolumeError(f'volume "{name}": kind {kinds} is not supported by the mini-kubelet')
    return result


def container_mounts(
    container: Mapping[str, Any], volumes: Mapping[str, Path], *, termination_file: Path
) -> list[Mount]:
    """The mounts of one container.

    Args:
        container: The container spec.
        volumes: Volume name -> host path (:func:`volume_dirs`).
        termination_file: The host file standing in for the container's ``terminationMessagePath``.

    Returns:
        One mount per volumeMount, then the termination-message file.

    Raises:
        VolumeError: A volumeMount names an unknown volume.
    """
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        name = str(vm.get("name", ""))
        if name not in volumes:
            raise VolumeError(f'container "{container.get("name")}": volumeMount of unknown volume "{name}"')
        host = volumes[name]
        sub = posixpath.normpath("/" + str(vm.get("subPath") or "")).lstrip("/")
        if sub:
            host = host / sub
        mounts.append(Mount(str(vm.get("mountPath", "")), host, bool(vm.get("readOnly", False))))
    path = str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH)
    mounts.append(Mount(path, termination_file))
    return mounts
