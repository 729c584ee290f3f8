"""The mini-kubelet: one manual Node whose pods run as local processes, served from a thread of the test process.

:class:`MiniKubelet` owns a thread with its own asyncio event loop (so it serves pods whatever the test does with its
own loop, sync or async). :meth:`MiniKubelet.start` creates the Node (:class:`~.node.ManualNode`), writes its Ready
status, and returns once the pod watch (``spec.nodeName=<node>``) has listed; each pod UID then gets a
:class:`~.pod.PodWorker`. The watch relists after any error (410 Gone included): a pod that vanished meanwhile
counts as deleted outright, its processes are killed.

:meth:`MiniKubelet.stop` kills every process (SIGKILL to each process group, each reaped), force-deletes the pods
still bound to the node and deletes the Node, then joins the thread: nothing it started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from pathlib import Path
from typing import Any

import structlog

from kthena_py.kube import AlreadyExists, ApiError, KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import NODES, PODS
from kthena_py.testing.kubelet.node import ManualNode, PodIPPool
from kthena_py.testing.kubelet.paths import host_path_for
from kthena_py.testing.kubelet.pod import PodWorker, WorkerConfig, now_rfc3339, pod_dir_name
from kthena_py.testing.kubelet.runner import CommandMapper, ContainerRunner

__all__ = ["SHARED_POD_IPS", "MiniKubelet"]

log = structlog.get_logger("kthena_py.testing.kubelet")

SHARED_POD_IPS = PodIPPool()
"""The pod IP pool of every mini-kubelet of the process that is given none."""


class MiniKubelet:
    """Runs the pods bound to one manual node as local processes (see the package docstring for what it bends).

    Args:
        kubeconfig: Admin kubeconfig of the cluster.
        node: The node, or a name for a default :class:`~.node.ManualNode`.
        root: This kubelet's directory: ``host/`` stands for the node's file system (``hostPath``), ``pods/`` holds
            pod directories (logs, emptyDirs, working directories).
        volume_root: Root of PersistentVolume paths (default ``root/host``); give several kubelets one
            ``volume_root`` to share claims between nodes, as network storage would.
        runner: Container -> argv (default :class:`~.runner.CommandMapper`).
        ip_pool: Pod IPs (default :data:`SHARED_POD_IPS`).
        max_grace: Longest wait between SIGTERM and SIGKILL when a pod is deleted, seconds.
    """

    def __init__(
        self,
        kubeconfig: str | Path,
        node: ManualNode | str,
        root: str | Path,
        *,
        volume_root: str | Path | None = None,
        runner: ContainerRunner | None = None,
        ip_pool: PodIPPool | None = None,
        max_grace: float = 5.0,
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.node = ManualNode(node) if isinstance(node, str) else node
        self.root = Path(root)
        self.host_root = self.root / "host"
        self.pods_root = self.root / "pods"
        self.volume_root = Path(volume_root) if volume_root is not None else self.host_root
        self._config = WorkerConfig(
            node_name=self.node.name,
            host_root=self.host_root,
            volume_root=self.volume_root,
            pods_root=self.pods_root,
            runner=runner or CommandMapper(),
            ip_pool=ip_pool or SHARED_POD_IPS,
            max_grace=max_grace,
        )
        self._workers: dict[str, PodWorker] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._uids: dict[tuple[str, str], str] = {}
        self._finished: set[str] = set()
        """UIDs whose worker ended (final delete sent) while the pod still exists, e.g. behind a finalizer."""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._log = log.bind(node=self.node.name)

    # ----------------------------------------------------------------------------- public helpers

    def placement(self) -> dict[str, Any]:
        """``nodeSelector`` and ``tolerations`` that put a pod on this node (:meth:`ManualNode.placement`)."""
        return self.node.placement()

    def host_path(self, path: str) -> Path:
        """The local directory standing in for the node path ``path`` (a ``hostPath`` volume's)."""
        return host_path_for(self.host_root, path)

    def volume_path(self, path: str) -> Path:
        """The local directory standing in for a PersistentVolume's ``hostPath``/``local`` path."""
        return host_path_for(self.volume_root, path)

    def pod_dir(self, namespace: str, name: str) -> Path:
        """The directory of the last pod of that name this kubelet saw.

        Raises:
            KeyError: It never saw such a pod.
        """
        uid = self._uids[(namespace, name)]
        return self.pods_root / pod_dir_name(namespace, name, uid)

    def log_path(self, namespace: str, name: str, container: str, restart_count: int | None = None) -> Path:
        """A container's log file (default: of its latest run).

        Raises:
            KeyError: This kubelet never saw such a pod.
            FileNotFoundError: The container never started.
        """
        logs = self.pod_dir(namespace, name) / "logs" / container
        if restart_count is not None:
            return logs / f"{restart_count}.log"
        runs = sorted(logs.glob("*.log"), key=lambda p: int(p.stem))
        if not runs:
            raise FileNotFoundError(f"no log for container {container} of {namespace}/{name}")
        return runs[-1]

    def container_log(self, namespace: str, name: str, container: str, restart_count: int | None = None) -> str:
        """A container's output (stdout and stderr interleaved), see :meth:`log_path`."""
        return self.log_path(namespace, name, container, restart_count).read_text(errors="replace")

    def pids(self, namespace: str, name: str) -> dict[str, int]:
        """Container name -> pid of each running process of the pod (empty when none runs)."""
        uid = self._uids.get((namespace, name))
        worker = self._workers.get(uid) if uid else None
        return worker.pids() if worker else {}

    # ----------------------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 60.0) -> MiniKubelet:
        """Register the node and start serving its pods.

        Args:
            timeout: Seconds to wait for the node and the first pod list.

        Returns:
            self.

        Raises:
            RuntimeError: Already started, or it failed or timed out starting (the thread is stopped).
        """
        if self._thread is not None:
            raise RuntimeError("already started")
        self.host_root.mkdir(parents=True, exist_ok=True)
        self.pods_root.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._thread_main, name=f"mini-kubelet-{self.node.name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            self.stop()
            raise RuntimeError(f"mini-kubelet {self.node.name} did not start: {self._error!r}")
        return self

    def stop(self, timeout: float = 60.0, *, remove_node: bool = True) -> None:
        """Kill every process, then (by default) force-delete the node's pods and the node; idempotent.

        Args:
            timeout: Seconds to wait for the thread.
            remove_node: Delete the pods bound to the node and the Node itself.

        Raises:
            RuntimeError: The thread did not end in time.
        """
        self._remove_node = remove_node
        thread = self._thread
        if thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"mini-kubelet {self.node.name} did not stop within {timeout}s")
        self._thread = None

    def __enter__(self) -> MiniKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------------- the thread

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start(): the thread must not die silently
            self._error = exc
            self._log.error("mini-kubelet failed", error=repr(exc))
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._remove_node = True
        client = await KubeClient.from_kubeconfig(self.kubeconfig)
        watcher: asyncio.Task[None] | None = None
        try:
            await self._register_node(client)
            watcher = asyncio.create_task(self._watch(client))
            stopping = asyncio.create_task(self._stop.wait())
            await asyncio.wait({watcher, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if watcher.done() and watcher.exception() is not None:
                raise watcher.exception()  # type: ignore[misc]
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._remove_node:
                await self._unregister_node(client)
            await client.close()
            self._log.info("mini-kubelet stopped")

    async def _register_node(self, client: KubeClient) -> None:
        manifest = self.node.manifest(now_rfc3339())
        with contextlib.suppress(AlreadyExists):
            await client.create(NODES, manifest)
        await client.patch(NODES, self.node.name, {"status": manifest["status"]}, subresource="status")
        self._log.info("node registered")

    async def _unregister_node(self, client: KubeClient) -> None:
        with contextlib.suppress(ApiError):
            pods = await client.list_all(PODS, field_selector=f"spec.nodeName={self.node.name}")
            for pod in pods.items:
                meta = pod["metadata"]
                with contextlib.suppress(NotFound):
                    await client.delete(PODS, meta["name"], meta["namespace"], grace_period_seconds=0)
        with contextlib.suppress(NotFound):
            await client.delete(NODES, self.node.name)

    async def _watch(self, client: KubeClient) -> None:
        selector = f"spec.nodeName={self.node.name}"
        failures = 0
        while True:
            try:
                listed = await client.list_all(PODS, field_selector=selector)
                self._sync(client, listed.items)
                self._ready.set()
                async for event in client.watch(
                    PODS, field_selector=selector, resource_version=listed.resource_version, timeout_seconds=60
                ):
                    failures = 0
                    if event.type == "DELETED":
                        self._forget(str(event.object["metadata"]["uid"]))
                    elif event.type in ("ADDED", "MODIFIED"):
                        self._observe(client, event.object)
            except ApiError as exc:
                self._log.warning("pod watch ended; relisting", error=str(exc))
                failures += 1
                await asyncio.sleep(min(2.0, 0.1 * 2**failures))  # retry backoff, not synchronisation

    def _sync(self, client: KubeClient, pods: list[KubeObject]) -> None:
        seen = {str(p["metadata"]["uid"]) for p in pods}
        self._finished &= seen
        for uid in list(self._workers):
            if uid not in seen:
                self._forget(uid)
        for pod in pods:
            self._observe(client, pod)

    def _observe(self, client: KubeClient, pod: KubeObject) -> None:
        meta = pod["metadata"]
        uid = str(meta["uid"])
        if uid in self._finished:
            return
        worker = self._workers.get(uid)
        if worker is not None:
            worker.update(pod)
            return
        worker = PodWorker(client, self._config, pod)
        self._workers[uid] = worker
        self._uids[(str(meta["namespace"]), str(meta["name"]))] = uid
        task = asyncio.create_task(worker.run(), name=f"pod {meta['namespace']}/{meta['name']}")
        self._tasks[uid] = task
        task.add_done_callback(functools.partial(self._done, uid))

    def _forget(self, uid: str) -> None:
        self._finished.discard(uid)
        task = self._tasks.get(uid)
        if task is not None and not task.done():
            task.cancel()

    def _done(self, uid: str, task: asyncio.Task[None]) -> None:
        self._tasks.pop(uid, None)
        self._workers.pop(uid, None)
        if not task.cancelled():
            self._finished.add(uid)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("pod worker crashed", uid=uid, error=repr(task.exception()))
