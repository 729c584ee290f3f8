"""One pod on a mini-kubelet node: prepare, run init containers then containers as local processes, report, finish.

The life of a :class:`PodWorker` (one asyncio task per pod UID):

1. Lease a pod IP; write ``Pending`` with every container waiting (``ContainerCreating``/``PodInitializing``).
2. Prepare: volumes (:mod:`.volumes`), environment (:mod:`.env`, Secrets and ConfigMaps read from the API), argv
   (:mod:`.runner`), mounts and the path rewrite (:mod:`.paths`). An unmappable container leaves the pod
   ``Pending`` with ``ErrImagePull`` naming it, until the pod is deleted; a missing Secret, ConfigMap or unbound
   claim is ``CreateContainerConfigError``/``ContainerCreating`` and retried with backoff.
3. Init containers, one after the other; a failure restarts it (``OnFailure``/``Always``) or fails the pod
   (``Never``). Then every container at once: ``Running``; each exit is ``terminated`` or a restart with
   ``restartCount`` + 1 after a short backoff (:func:`~.status.should_restart`), until the phase is terminal.
4. Deletion: once the pod has a ``deletionTimestamp``, every process gets SIGTERM, then SIGKILL after the pod's
   grace period capped at ``max_grace``, and the pod is deleted with grace 0 and a UID precondition (the kubelet's
   final delete). A pod deleted outright, or a kubelet stopping, kills its processes at once.

Every status write is a JSON merge patch of the ``status`` subresource with ``metadata.uid`` as a precondition, so a
same-named replacement pod is never written to. Each process's output goes to
``<pod dir>/logs/<container>/<restartCount>.log``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from kthena_py.kube import ApiError, Conflict, KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, EVENTS, PODS, SECRETS, ResourceType
from kthena_py.testing.kubelet import status as st
from kthena_py.testing.kubelet.env import ContainerConfigError, env_sources, expand, resolve_env
from kthena_py.testing.kubelet.node import NODE_IP, PodIPPool
from kthena_py.testing.kubelet.paths import MountTable
from kthena_py.testing.kubelet.processes import spawn, stop_process, wait_process
from kthena_py.testing.kubelet.runner import ContainerRunner
from kthena_py.testing.kubelet.volumes import FILE_VOLUME_KINDS, VolumeError, container_mounts, volume_dirs

__all__ = ["PodWorker", "now_rfc3339"]

log = structlog.get_logger("kthena_py.testing.kubelet")

PVCS = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
PVS = ResourceType("", "v1", "PersistentVolume", "persistentvolumes", namespaced=False)
_PATH_ENV = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")


def now_rfc3339() -> str:
    """The current UTC time, RFC 3339 with seconds (as Kubernetes writes timestamps)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Unrunnable(Exception):
    """The pod cannot start: ``reason`` for the waiting containers; ``retry`` whether another try may succeed."""

    def __init__(self, reason: str, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry = retry


@dataclass(frozen=True)
class _Prepared:
    name: str
    image: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    termination_file: Path
    termination_policy: str


@dataclass(frozen=True)
class WorkerConfig:
    """What every pod worker of one kubelet shares.

    Attributes:
        node_name: The node.
        host_root: Root for ``hostPath`` volumes.
        volume_root: Root for PersistentVolume paths.
        pods_root: Where pod directories (logs, emptyDirs, working dirs) go.
        runner: Container -> argv.
        ip_pool: Pod IPs.
        max_grace: Longest wait between SIGTERM and SIGKILL on deletion, seconds.
    """

    node_name: str
    host_root: Path
    volume_root: Path
    pods_root: Path
    runner: ContainerRunner
    ip_pool: PodIPPool
    max_grace: float


def pod_dir_name(namespace: str, name: str, uid: str) -> str:
    """The directory name of a pod under the kubelet's pods root."""
    return f"{namespace}_{name}_{uid}"


class PodWorker:
    """Runs one pod (see the module docstring).

    Args:
        client: API client (of the kubelet's event loop).
        config: Shared settings.
        pod: The pod as first seen.
    """

    def __init__(self, client: KubeClient, config: WorkerConfig, pod: KubeObject) -> None:
        self._client = client
        self._config = config
        self.pod = pod
        meta = pod["metadata"]
        self.namespace = str(meta["namespace"])
        self.name = str(meta["name"])
        self.uid = str(meta["uid"])
        self.dir = config.pods_root / pod_dir_name(self.namespace, self.name, self.uid)
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self._deleting = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._pod_ip = ""
        self._start_time = ""
        self._initialized = False
        self._init_statuses: dict[str, st.Status] = {}
        self._statuses: dict[str, st.Status] = {}
        self._log = log.bind(pod=f"{self.namespace}/{self.name}", uid=self.uid, node=config.node_name)
        self.update(pod)

    # ----------------------------------------------------------------------------- inputs

    def update(self, pod: KubeObject) -> None:
        """Take a newer version of the pod (from the watch)."""
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self._deleting.set()

    def pids(self) -> dict[str, int]:
        """Container name -> pid of its running process."""
        return {name: p.pid for name, p in list(self.processes.items()) if p.returncode is None}

    # ----------------------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """The pod's whole life; cancelling it kills its processes at once (pod gone, kubelet stopping)."""
        try:
            phase = (self.pod.get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed"):
                life = asyncio.create_task(self._live())
                deleting = asyncio.create_task(self._deleting.wait())
                try:
                    await asyncio.wait({life, deleting}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    deleting.cancel()
                    if not life.done():
                        life.cancel()
                        await asyncio.gather(life, return_exceptions=True)
                    elif life.exception() is not None:
                        self._log.error("pod worker failed", error=repr(life.exception()))
            await self._deleting.wait()
            await self._terminate(self._grace())
            await self._final_delete()
        finally:
            await asyncio.shield(self._terminate(0.0))
            self._config.ip_pool.release(self.uid)

    def _grace(self) -> float:
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        return float(min(float(grace or 0), self._config.max_grace))

    async def _terminate(self, grace: float) -> None:
        procs = [p for p in self.processes.values() if p.returncode is None]
        if procs and grace > 0:
            self._log.info("killing containers", grace=grace, pids=[p.pid for p in procs])
            await self._event("Normal", "Killing", f"Stopping containers (grace {grace:g}s)")
        await asyncio.gather(*(stop_process(p, grace) for p in procs), return_exceptions=True)

    async def _final_delete(self) -> None:
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete(PODS, self.name, self.namespace, uid=self.uid, grace_period_seconds=0)
        self._log.info("pod deleted")

    async def _live(self) -> None:
        self._pod_ip = self._config.ip_pool.lease(self.uid)
        self._start_time = now_rfc3339()
        spec = self.pod.get("spec") or {}
        inits = list(spec.get("initContainers") or [])
        apps = list(spec.get("containers") or [])
        first = "PodInitializing" if inits else "ContainerCreating"
        self._init_statuses = {c["name"]: st.waiting(c["name"], c.get("image", ""), "PodInitializing") for c in inits}
        self._statuses = {c["name"]: st.waiting(c["name"], c.get("image", ""), first) for c in apps}
        await self._write()
        prepared = await self._prepare_until_ready(inits, apps)
        policy = str(spec.get("restartPolicy") or "Always")
        for container in prepared[: len(inits)]:
            if not await self._run_init(container, policy):
                await self._write(phase="Failed")
                return
        self._initialized = True
        await asyncio.gather(*(self._run_app(c, policy) for c in prepared[len(inits) :]))
        self._log.info("pod finished", phase=st.pod_phase(policy, True, list(self._statuses.values())))

    async def _prepare_until_ready(self, inits: list[KubeObject], apps: list[KubeObject]) -> list[_Prepared]:
        attempt = 0
        while True:
            try:
                return await self._prepare([*inits, *apps])
            except _Unrunnable as exc:
                self._log.warning("pod cannot start", reason=exc.reason, message=exc.message)
                for statuses in (self._init_statuses, self._statuses):
                    for name, old in statuses.items():
                        statuses[name] = st.waiting(name, old["image"], exc.reason, exc.message)
                await self._write()
                await self._event("Warning", "Failed", exc.message)
                if not exc.retry:
                    await asyncio.Event().wait()  # until the pod is deleted (run() cancels this)
                await asyncio.sleep(st.restart_delay(attempt, base=0.5, cap=5.0))
                attempt += 1

    # ----------------------------------------------------------------------------- preparation

    async def _prepare(self, containers: list[KubeObject]) -> list[_Prepared]:
        runner = self._config.runner
        commands = []
        for c in containers:
            command = runner.argv(c)
            if command is None:
                raise _Unrunnable(
                    "ErrImagePull",
                    f'mini-kubelet cannot run container "{c["name"]}" (image "{c.get("image", "")}", command '
                    f"{c.get('command') or []}): no local program mapped",
                    retry=False,
                )
            commands.append(command)
        volumes = await self._volumes()
        prepared = []
        for c, command in zip(containers, commands, strict=True):
            env = await self._environment(c)
            termination_file = self.dir / "termination" / c["name"]
            termination_file.parent.mkdir(parents=True, exist_ok=True)
            try:
                mounts = container_mounts(c, volumes, termination_file=termination_file)
            except VolumeError as exc:
                raise _Unrunnable("CreateContainerConfigError", str(exc), retry=False) from exc
            for vm, mount in zip(c.get("volumeMounts") or [], mounts, strict=False):
                if vm.get("subPath"):
                    mount.host.mkdir(parents=True, exist_ok=True)  # the kubelet creates a missing subPath
            table = MountTable(mounts)
            mapped_env = {k: table.map_value(v) for k, v in env.items()}
            working_dir = c.get("workingDir")
            cwd = Path(table.map_path(working_dir) or "") if working_dir else None
            if cwd is None or not str(cwd):
                cwd = self.dir / "work" / c["name"]
            cwd.mkdir(parents=True, exist_ok=True)
            base = {"PATH": _PATH_ENV, "HOME": str(cwd), "HOSTNAME": self.name}
            prepared.append(
                _Prepared(
                    name=c["name"],
                    image=str(c.get("image", "")),
                    argv=[*command.program, *(table.map_value(expand(a, env)) for a in command.args)],
                    env={**base, **mapped_env},
                    cwd=cwd,
                    termination_file=termination_file,
                    termination_policy=str(c.get("terminationMessagePolicy") or "File"),
                )
            )
        return prepared

    async def _volumes(self) -> dict[str, Path]:
        spec = self.pod.get("spec") or {}
        claims: dict[str, str] = {}
        for volume in spec.get("volumes") or []:
            if "persistentVolumeClaim" in volume:
                claim = str(volume["persistentVolumeClaim"].get("claimName", ""))
                claims[claim] = await self._claim_path(claim)
        try:
            dirs = volume_dirs(
                self.pod,
                host_root=self._config.host_root,
                volume_root=self._config.volume_root,
                pod_dir=self.dir,
                claims=claims,
            )
        except VolumeError as exc:
            raise _Unrunnable("ContainerCreating", str(exc), retry=False) from exc
        by_name = {str(v["name"]): v for v in spec.get("volumes") or []}
        for name, path in dirs.items():
            volume = by_name[name]
            kind = next((k for k in FILE_VOLUME_KINDS if k in volume), None)
            host_type = str((volume.get("hostPath") or {}).get("type") or "")
            if host_type not in ("File", "FileOrCreate", "Socket", "CharDevice", "BlockDevice"):
                path.mkdir(parents=True, exist_ok=True)
            if kind is not None:
                await self._write_files(path, kind, volume[kind])
        return dirs

    async def _claim_path(self, claim: str) -> str:
        try:
            pvc = await self._client.get(PVCS, claim, self.namespace)
        except NotFound:
            raise _Unrunnable("ContainerCreating", f'persistentvolumeclaim "{claim}" not found', retry=True) from None
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if (pvc.get("status") or {}).get("phase") != "Bound" or not volume_name:
            raise _Unrunnable("ContainerCreating", f'persistentvolumeclaim "{claim}" is not bound', retry=True)
        pv_spec = (await self._client.get(PVS, str(volume_name))).get("spec") or {}
        path = (pv_spec.get("hostPath") or {}).get("path") or (pv_spec.get("local") or {}).get("path")
        if not path:
            raise _Unrunnable(
                "ContainerCreating", f'persistentvolume "{volume_name}" has no hostPath or local path', retry=False
            )
        return str(path)

    async def _write_files(self, path: Path, kind: str, source: Mapping[str, Any]) -> None:
        name = str(source.get("secretName" if kind == "secret" else "name", ""))
        data = await self._read_data(SECRETS if kind == "secret" else CONFIGMAPS, name)
        if data is None:
            if source.get("optional"):
                return
            raise _Unrunnable("ContainerCreating", f'{kind} "{name}" not found', retry=True)
        items = source.get("items")
        wanted = {str(i["key"]): str(i["path"]) for i in items} if items else {k: k for k in data}
        for key, rel in wanted.items():
            if key in data:
                target = path / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(data[key])

    async def _read_data(self, rt: ResourceType, name: str) -> dict[str, str] | None:
        try:
            obj = await self._client.get(rt, name, self.namespace)
        except NotFound:
            return None
        if rt is SECRETS:
            raw = {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
            return {**raw, **(obj.get("stringData") or {})}
        binary = {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("binaryData") or {}).items()}
        return {**binary, **(obj.get("data") or {})}

    async def _environment(self, container: KubeObject) -> dict[str, str]:
        sources = env_sources(container)
        secrets = {n: d for n in sources.secrets if (d := await self._read_data(SECRETS, n)) is not None}
        config_maps = {n: d for n in sources.config_maps if (d := await self._read_data(CONFIGMAPS, n)) is not None}
        try:
            return resolve_env(
                self.pod, container, pod_ip=self._pod_ip, host_ip=NODE_IP, secrets=secrets, config_maps=config_maps
            )
        except ContainerConfigError as exc:
            raise _Unrunnable("CreateContainerConfigError", str(exc), retry=True) from exc

    # ----------------------------------------------------------------------------- running

    async def _exec(
        self, c: _Prepared, restart_count: int, on_start: Callable[[str], Awaitable[None]]
    ) -> tuple[int, str, str, str]:
        """Run one process to its end: (exit code, started, finished, termination message).

        ``on_start(started)`` runs once the process exists, before it is waited for: a status saying Running is
        written only when the process really runs.
        """
        c.termination_file.write_bytes(b"")
        log_file = self.dir / "logs" / c.name / f"{restart_count}.log"
        started = now_rfc3339()
        try:
            proc = await spawn(c.argv, env=c.env, cwd=c.cwd, log=log_file)
        except OSError as exc:
            log_file.write_text(f"mini-kubelet: cannot start {c.argv[0]}: {exc}\n")
            return 128, started, now_rfc3339(), f"cannot start {c.argv[0]}: {exc}"
        self.processes[c.name] = proc
        self._log.info("container started", container=c.name, pid=proc.pid, restart_count=restart_count)
        await on_start(started)  # cancelled: the process lives on until run() stops it, gracefully
        code = await wait_process(proc)
        finished = now_rfc3339()
        tail = log_file.read_bytes()[-64 * 1024 :] if log_file.exists() else b""
        message = st.termination_message(
            c.termination_policy, c.termination_file.read_bytes()[: st.MAX_MESSAGE_BYTES], tail, code
        )
        self._log.info("container exited", container=c.name, exit_code=code, restart_count=restart_count)
        return code, started, finished, message

    async def _run_init(self, c: _Prepared, policy: str) -> bool:
        restarts = 0
        last: st.Status | None = None
        while True:

            async def started_init(at: str, restarts: int = restarts, last: st.Status | None = last) -> None:
                self._init_statuses[c.name] = st.running(c.name, c.image, at, restart_count=restarts, last=last)
                self._init_statuses[c.name]["ready"] = False
                await self._write()

            code, started, finished, message = await self._exec(c, restarts, started_init)
            done = st.terminated(
                c.name, c.image, code, started_at=started, finished_at=finished, message=message,
                restart_count=restarts, last=last,
            )  # fmt: skip
            if code == 0 or policy == "Never":
                self._init_statuses[c.name] = done
                return code == 0
            restarts += 1
            last = done
            self._init_statuses[c.name] = st.waiting(
                c.name, c.image, "CrashLoopBackOff", restart_count=restarts, last=done
            )
            await self._write()
            await asyncio.sleep(st.restart_delay(restarts - 1))

    async def _run_app(self, c: _Prepared, policy: str) -> None:
        restarts = 0
        last: st.Status | None = None
        while True:

            async def started_app(at: str, restarts: int = restarts, last: st.Status | None = last) -> None:
                self._statuses[c.name] = st.running(c.name, c.image, at, restart_count=restarts, last=last)
                await self._write()
                await self._event("Normal", "Started", f"Started container {c.name}")

            code, started, finished, message = await self._exec(c, restarts, started_app)
            done = st.terminated(
                c.name, c.image, code, started_at=started, finished_at=finished, message=message,
                restart_count=restarts, last=last,
            )  # fmt: skip
            if not st.should_restart(policy, code):
                self._statuses[c.name] = done
                await self._write()
                return
            restarts += 1
            last = done
            reason = "CrashLoopBackOff" if code else "Completed"
            self._statuses[c.name] = st.waiting(c.name, c.image, reason, restart_count=restarts, last=done)
            await self._write()
            await asyncio.sleep(st.restart_delay(restarts - 1))

    # ----------------------------------------------------------------------------- API writes

    async def _write(self, *, phase: str | None = None) -> None:
        async with self._write_lock:
            status = st.pod_status(
                self.pod,
                now=now_rfc3339(),
                pod_ip=self._pod_ip,
                host_ip=NODE_IP,
                start_time=self._start_time,
                initialized=self._initialized,
                init_statuses=list(self._init_statuses.values()),
                statuses=list(self._statuses.values()),
                phase=phase,
            )
            body = {"metadata": {"uid": self.uid}, "status": status}
            for attempt in range(6):
                try:
                    self.pod = await self._client.patch(PODS, self.name, body, self.namespace, subresource="status")
                    return
                except (NotFound, Conflict):
                    return  # the pod is gone or replaced: nothing to report to
                except ApiError as exc:
                    self._log.warning("status write failed", error=str(exc), attempt=attempt)
                    await asyncio.sleep(st.restart_delay(attempt))

    async def _event(self, type_: str, reason: str, message: str) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event = {
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": "v1", "kind": "Pod", "name": self.name, "namespace": self.namespace, "uid": self.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": "mini-kubelet", "host": self._config.node_name},
            "reportingComponent": "mini-kubelet",
            "reportingInstance": self._config.node_name,
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "count": 1,
        }  # fmt: skip
        with contextlib.suppress(ApiError):
            await self._client.create(EVENTS, event, self.namespace)
