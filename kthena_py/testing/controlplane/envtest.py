"""The envtest tier: a real etcd and kube-apiserver on loopback with throw-away certificates.

What runs: ``etcd`` (``--unsafe-no-fsync``, client and peer URLs on 127.0.0.1, metrics on the
client URL only) and ``kube-apiserver`` (``--bind-address=127.0.0.1``, RBAC, client-certificate
authentication, watch cache on, priority-and-fairness off). No controller-manager, scheduler or
kubelet: use :class:`~kthena_py.testing.controlplane.cluster.ClusterTier` for garbage collection,
namespace deletion or running pods.

Guarantees after :meth:`EnvTest.start` returns:

* ``/readyz`` answered 200 over TLS verified against our serving CA, and namespace ``default``
  exists.
* ``<run_dir>/kubeconfig`` authenticates as ``admin`` (group ``system:masters``) and verifies the
  server with the embedded CA.
* Every CRD given to the constructor or :meth:`EnvTest.install_crds` is listed by discovery for every
  served version.
* Every server socket listens on 127.0.0.1 only; logs are in ``<run_dir>/logs/<component>.log``.
* The watch cache is on for every resource except ``podtemplates`` (and events, as upstream):
  PodTemplate watches are served from etcd, so after :meth:`EnvTest.compact_etcd` a watch from an
  older ``resourceVersion`` gets 410 Gone — the seam for testing relist logic.
* A start that fails because a chosen port was taken meanwhile is retried (3 attempts by default)
  with fresh ports and fresh etcd data. Any other failure stops what was started and raises.

:meth:`EnvTest.stop` stops every process (SIGTERM to its group, then SIGKILL) and deletes the etcd data
(the logs, certificates and kubeconfig stay). Instances are context managers.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from kthena_py.testing.controlplane.binaries import EnvTestBinaries, find_envtest_binaries
from kthena_py.testing.controlplane.kubeapi import ApiError, KubeHTTP
from kthena_py.testing.controlplane.pki import PKI
from kthena_py.testing.controlplane.process import (
    ManagedProcess,
    ProcessExitedError,
    free_ports,
    wait_for,
)

__all__ = ["CRDSource", "EnvTest", "load_crds"]

CRDSource = str | Path | Mapping[str, Any]
"""A CRD source: a YAML/JSON file, a directory of them, or one CRD as a dict."""

_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_ETCD_PREFIX = "/registry"
# etcd is on loopback: never route its requests through an HTTP(S)_PROXY from the environment.
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def load_crds(sources: Iterable[CRDSource]) -> list[dict[str, Any]]:
    """Read CRD manifests.

    Args:
        sources: Files (multi-document YAML or JSON), directories (their ``*.yaml``, ``*.yml`` and
            ``*.json`` files, sorted by name, not recursive) or dicts.

    Returns:
        The CRDs, in order.

    Raises:
        ValueError: A document is not a ``CustomResourceDefinition``.
        FileNotFoundError: A path does not exist.
    """
    docs: list[dict[str, Any]] = []
    for src in sources:
        if isinstance(src, Mapping):
            docs.append(dict(src))
            continue
        path = Path(src)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml", ".json"})
        elif path.exists():
            files = [path]
        else:
            raise FileNotFoundError(f"CRD source not found: {path}")
        for f in files:
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    for d in docs:
        if d.get("kind") != "CustomResourceDefinition":
            name = d.get("metadata", {}).get("name")
            raise ValueError(f"not a CustomResourceDefinition: kind={d.get('kind')!r} name={name!r}")
    return docs


class EnvTest:
    """etcd + kube-apiserver on loopback.

    Args:
        run_dir: Directory for certificates, kubeconfig, logs and etcd data (created if missing).
        binaries: Binary paths; default: :func:`find_envtest_binaries` at :meth:`start`.
        crds: CRDs to install during :meth:`start`.
        apiserver_args: Extra kube-apiserver flags (``--name=value``), appended last.
        service_account_admission: Keep the API server's ``ServiceAccount`` admission plugin on, as every real cluster
            has it: each pod gets its service-account token volume, and a pod is created only once its ServiceAccount
            exists (a test or kube-controller-manager creates it). Off by default: envtest runs no controller that
            creates the ``default`` ServiceAccounts.
        start_timeout: Seconds each component may take to become ready.
        stop_timeout: Seconds between SIGTERM and SIGKILL per component.
        start_attempts: Attempts at starting etcd + apiserver when a port race is detected.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        binaries: EnvTestBinaries | None = None,
        crds: Sequence[CRDSource] = (),
        apiserver_args: Sequence[str] = (),
        service_account_admission: bool = False,
        start_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        start_attempts: int = 3,
    ) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.service_account_admission = service_account_admission
        self.log_dir = self.run_dir / "logs"
        self.kubeconfig_path = self.run_dir / "kubeconfig"
        self._binaries = binaries
        self._crds = list(crds)
        self._apiserver_args = list(apiserver_args)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._start_attempts = start_attempts
        self._pki: PKI | None = None
        self._client: KubeHTTP | None = None
        self._ports: dict[str, int] = {}
        self._processes: list[ManagedProcess] = []
        self._started_at: float | None = None
        self.startup_seconds: float | None = None
        """Wall-clock seconds the last :meth:`start` took, once it returned."""

    # ----------------------------------------------------------------------------- properties

    @property
    def pki(self) -> PKI:
        """Certificates of this run (available after :meth:`start`)."""
        if self._pki is None:
            raise RuntimeError("not started")
        return self._pki

    @property
    def client(self) -> KubeHTTP:
        """An admin client for the apiserver (available after :meth:`start`)."""
        if self._client is None:
            raise RuntimeError("not started")
        return self._client

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        return f"https://127.0.0.1:{self._port('apiserver')}"

    @property
    def etcd_endpoint(self) -> str:
        """The etcd client URL (plain HTTP on loopback), e.g. for compaction or direct reads."""
        return f"http://127.0.0.1:{self._port('etcd-client')}"

    @property
    def etcd_prefix(self) -> str:
        """Key prefix under which the apiserver stores objects in etcd (``--etcd-prefix``)."""
        return _ETCD_PREFIX

    @property
    def ports(self) -> dict[str, int]:
        """Ports in use by name (``etcd-client``, ``etcd-peer``, ``apiserver``)."""
        return dict(self._ports)

    @property
    def processes(self) -> list[ManagedProcess]:
        """The running components, in start order."""
        return list(self._processes)

    def _port(self, name: str) -> int:
        try:
            return self._ports[name]
        except KeyError:
            raise RuntimeError("not started") from None

    # ----------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _resolve_binaries(self) -> EnvTestBinaries:
        return self._binaries or find_envtest_binaries()

    def start(self) -> None:
        """Start the tier; see the module docstring for what holds when this returns.

        Raises:
            BinariesNotFoundError: A binary has not been built.
            ProcessExitedError: A component exited during start (after the last attempt).
            StartupTimeoutError: A component did not become ready in time.
        """
        if self._processes:
            raise RuntimeError("already started")
        t0 = time.monotonic()
        binaries = self._resolve_binaries()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._pki = PKI(self.run_dir / "pki")
        for attempt in range(1, self._start_attempts + 1):
            try:
                self._start_core(binaries)
                break
            except ProcessExitedError as e:
                self._stop_processes()
                if not e.port_in_use or attempt == self._start_attempts:
                    raise
            except BaseException:
                self._stop_processes()
                raise
        try:
            self.install_crds(self._crds)
            self._start_components()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0

    def _start_core(self, binaries: EnvTestBinaries) -> None:
        etcd_client, etcd_peer, apiserver = free_ports(3)
        self._ports = {"etcd-client": etcd_client, "etcd-peer": etcd_peer, "apiserver": apiserver}
        data_dir = self.run_dir / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)
        etcd = self._spawn("etcd", [str(binaries.etcd), *self._etcd_args(data_dir)])
        wait_for("etcd /health", self._etcd_healthy, timeout=self.start_timeout, processes=[etcd])
        self._write_kubeconfig(self.kubeconfig_path)
        pki = self.pki
        self._client = KubeHTTP(self.server, pki.serving_ca_cert, pki.admin.cert, pki.admin.key)
        api = self._spawn("kube-apiserver", [str(binaries.kube_apiserver), *self._apiserver_flags()])
        procs = [etcd, api]
        wait_for("kube-apiserver /readyz", self._apiserver_ready, timeout=self.start_timeout, processes=procs)
        wait_for(
            "namespace default",
            lambda: self._exists("/api/v1/namespaces/default"),
            timeout=self.start_timeout,
            processes=procs,
        )

    def _start_components(self) -> None:
        """Start further components once the apiserver is ready and CRDs are installed (subclass hook)."""

    def stop(self) -> None:
        """Stop every component (reverse start order) and delete the etcd data. Idempotent."""
        self._stop_processes()
        shutil.rmtree(self.run_dir / "etcd-data", ignore_errors=True)

    def _stop_processes(self) -> None:
        procs = list(reversed(self._processes))
        self._processes.clear()
        # Clients of the apiserver first, all at once; then the apiserver; etcd last.
        clients = [p for p in procs if p.name not in ("kube-apiserver", "etcd")]
        for p in clients:
            p.terminate()
        for p in procs:
            p.stop(self.stop_timeout)

    def _spawn(self, name: str, args: Sequence[str]) -> ManagedProcess:
        proc = ManagedProcess(name, args, self.log_dir)
        proc.start()
        self._processes.append(proc)
        return proc

    def check_alive(self) -> None:
        """Raise if any component has exited.

        Raises:
            ProcessExitedError: A component exited.
        """
        for p in self._processes:
            p.check()

    # ----------------------------------------------------------------------------- flags

    def _etcd_args(self, data_dir: Path) -> list[str]:
        client = self.etcd_endpoint
        peer = f"http://127.0.0.1:{self._port('etcd-peer')}"
        return [
            "--name=kthena-py",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kthena-py={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def _apiserver_flags(self) -> list[str]:
        pki = self.pki
        port = self._port("apiserver")
        return [
            f"--etcd-servers={self.etcd_endpoint}",
            f"--etcd-prefix={_ETCD_PREFIX}",
            f"--cert-dir={pki.directory}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.client_ca_cert}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--disable-admission-plugins="
            + ("TaintNodesByCondition" if self.service_account_admission else "ServiceAccount,TaintNodesByCondition"),
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--profiling=false",
            "--watch-cache=true",
            # One resource without a watch cache: its watches go straight to etcd, so after an etcd
            # compaction an old resourceVersion really answers 410 Gone (see compact_etcd).
            "--watch-cache-sizes=podtemplates#0",
            "--endpoint-reconciler-type=none",
            # Server-side sharded list and watch (KEP-5866, alpha in 1.36): what a sharded manager detects.
            "--feature-gates=ShardedListAndWatch=true",
            "--v=1",
            *self._apiserver_args,
        ]

    # ----------------------------------------------------------------------------- probes

    def _etcd_healthy(self) -> bool | None:
        with _LOOPBACK_OPENER.open(f"{self.etcd_endpoint}/health", timeout=2) as resp:
            body = json.loads(resp.read())
        return True if body.get("health") == "true" else None

    def _apiserver_ready(self) -> bool | None:
        status, _ = self.client.raw("GET", "/readyz", timeout=5)
        return True if status == 200 else None

    def _exists(self, path: str) -> bool | None:
        status, _ = self.client.raw("GET", path, timeout=5)
        return True if status == 200 else None

    # ----------------------------------------------------------------------------- kubeconfig

    def kubeconfig(self, user: str = "admin", groups: tuple[str, ...] = ("system:masters",)) -> dict[str, Any]:
        """Build a kubeconfig dict with embedded credentials.

        Args:
            user: User name; ``admin`` uses the run's admin certificate, any other name mints one.
            groups: Groups of a minted user (ignored for ``admin``).

        Returns:
            The kubeconfig, e.g. for ``kubernetes_asyncio.config.load_kube_config_from_dict``.
        """
        pki = self.pki
        pair = pki.admin if user == "admin" else pki.issue_client(user, groups)

        def b64(p: Path) -> str:
            return base64.b64encode(p.read_bytes()).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kthena-py",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(pki.serving_ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": b64(pair.cert), "client-key-data": b64(pair.key)},
                }
            ],
            "contexts": [
                {
                    "name": "kthena-py",
                    "context": {"cluster": "kthena-py", "user": user, "namespace": "default"},
                }
            ],
            "current-context": "kthena-py",
        }

    def _write_kubeconfig(self, path: Path, **kwargs: Any) -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(**kwargs), sort_keys=False))
        path.chmod(0o600)
        return path

    def write_kubeconfig(self, path: str | Path, user: str, groups: tuple[str, ...] = ()) -> Path:
        """Write a kubeconfig for another (e.g. RBAC-restricted) user.

        Args:
            path: Destination file.
            user: User name (client certificate CN).
            groups: Groups (client certificate O values).

        Returns:
            The path written.
        """
        return self._write_kubeconfig(Path(path), user=user, groups=groups)

    # ----------------------------------------------------------------------------- CRDs

    def install_crds(self, sources: Iterable[CRDSource], *, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Create or update CRDs and wait until discovery serves them.

        Updating keeps retrying on write conflicts. Waiting means: for every served version,
        ``GET /apis/<group>/<version>`` lists ``spec.names.plural``.

        Args:
            sources: See :func:`load_crds`.
            timeout: Seconds to wait for discovery, for all CRDs together.

        Returns:
            The CRDs as stored by the apiserver.

        Raises:
            ApiError: The apiserver rejected a CRD.
            StartupTimeoutError: Discovery did not list them in time.
        """
        crds = load_crds(sources)
        stored = [self._apply_crd(crd) for crd in crds]
        deadline = time.monotonic() + timeout
        for crd in crds:
            spec = crd["spec"]
            plural = spec["names"]["plural"]
            for version in (v["name"] for v in spec["versions"] if v.get("served", True)):
                path = f"/apis/{spec['group']}/{version}"
                wait_for(
                    f"discovery of {plural}.{spec['group']}/{version}",
                    functools.partial(self._discovery_lists, path, plural),
                    timeout=max(0.5, deadline - time.monotonic()),
                    processes=self._processes,
                )
        return stored

    def _apply_crd(self, crd: Mapping[str, Any]) -> dict[str, Any]:
        name = crd["metadata"]["name"]
        body = {k: v for k, v in crd.items() if k != "status"}
        for _ in range(10):
            status, current = self.client.raw("GET", f"{_CRD_PATH}/{name}")
            if status == 404:
                status, result = self.client.raw("POST", _CRD_PATH, body)
                if status == 409:  # created concurrently: update instead
                    continue
            elif status == 200:
                meta = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
                status, result = self.client.raw("PUT", f"{_CRD_PATH}/{name}", {**body, "metadata": meta})
                if status == 409:
                    continue
            else:
                raise ApiError("GET", f"{_CRD_PATH}/{name}", status, current)
            if status not in (200, 201):
                raise ApiError("PUT/POST", f"{_CRD_PATH}/{name}", status, result)
            return dict(result)
        raise ApiError("PUT", f"{_CRD_PATH}/{name}", 409, "conflict after 10 attempts")

    def _discovery_lists(self, path: str, plural: str) -> bool | None:
        status, body = self.client.raw("GET", path, timeout=5)
        if status != 200 or not isinstance(body, dict):
            return None
        return True if any(r.get("name") == plural for r in body.get("resources", [])) else None

    # ----------------------------------------------------------------------------- etcd

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (physically).

        Afterwards a watch from an older ``resourceVersion`` of a resource served without watch cache
        (``podtemplates``) gets 410 Gone; cached resources may still serve it from the watch cache.

        Returns:
            The revision compacted to.
        """

        def post(path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
            req = urllib.request.Request(
                f"{self.etcd_endpoint}{path}",
                data=json.dumps(payload).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with _LOOPBACK_OPENER.open(req, timeout=30) as resp:
                return dict(json.loads(resp.read()))

        key = base64.b64encode(_ETCD_PREFIX.encode()).decode()
        revision = int(post("/v3/kv/range", {"key": key, "limit": 1, "keys_only": True})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # ----------------------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        """Describe the running tier (for ``state.json``).

        Returns:
            Kubeconfig path, server URL, etcd endpoint/prefix, ports, and per-component pid/log.
        """
        return {
            "tier": type(self).__name__,
            "run_dir": str(self.run_dir),
            "kubeconfig": str(self.kubeconfig_path),
            "server": self.server,
            "etcd_endpoint": self.etcd_endpoint,
            "etcd_prefix": self.etcd_prefix,
            "ports": self.ports,
            "processes": {
                p.name: {"pid": p.pid, "start_ticks": p.start_ticks, "log": str(p.log_path), "args": p.args}
                for p in self._processes
            },
            "startup_seconds": self.startup_seconds,
        }
