"""Three sharded manager processes in a cluster of their own (kwok nodes, Volcano, kube-controller-manager), with
the API server's audit log as the witness.

Thirty namespaces with a ModelServing each become Available; the audit log, which records every write with the
``User-Agent`` of the process that sent it (each replica names its identity there), must show every namespace's
workload written by exactly one replica, the one the slot map gives its namespace to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import LEASES, NAMESPACES
from kthena_py.runtime.shards.hashing import namespace_slot
from kthena_py.runtime.shards.member import read_slot_map
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.wait import eventually

from .msutil import modelserving, role, wait_available

pytestmark = pytest.mark.cluster

GROUP = "sharded-replicas"
LEASE_NAMESPACE = "kthena-system"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]}, {"level": "None"}],
}
CRDS = sorted((Path(__file__).resolve().parents[2] / "manifests" / "crd").glob("*_*.yaml"))
WORKLOAD = {"pods", "services", "podgroups", "modelservings", "controllerrevisions"}


def writers_by_namespace(audit_log: Path, namespaces: set[str]) -> dict[str, set[str]]:
    """For each namespace, the managers (identity in the ``User-Agent``) whose workload writes succeeded there."""
    found: dict[str, set[str]] = defaultdict(set)
    for line in audit_log.read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        agent = entry.get("userAgent") or ""
        if entry.get("stage") != "ResponseComplete" or ref.get("namespace") not in namespaces:
            continue
        if ref.get("resource") not in WORKLOAD or " manager (" not in agent:
            continue
        if (entry.get("responseStatus") or {}).get("code", 0) >= 400:
            continue
        found[ref["namespace"]].add(agent.rsplit("(", 1)[1].rstrip(")"))
    return found


async def test_three_replicas_each_write_exactly_the_namespaces_of_their_slots(tmp_path: Path) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit_log = tmp_path / "audit.log"
    audit = [f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}", "--audit-log-format=json"]
    with ClusterTier(tmp_path / "tier", nodes=4, crds=CRDS, apiserver_args=audit) as tier:
        kube = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        processes: list[asyncio.subprocess.Process] = []
        try:
            teams = [f"team-{i:02d}" for i in range(30)]
            for ns in [LEASE_NAMESPACE, *teams]:
                await kube.create(NAMESPACES, {"metadata": {"name": ns}})
            for _ in range(3):
                processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "kthena_py",
                        "manager",
                        "--sharding",
                        "--lease-group",
                        GROUP,
                        "--leader-election-namespace",
                        LEASE_NAMESPACE,
                        "--kubeconfig",
                        str(tier.kubeconfig_path),
                        "--health-probe-bind-address",
                        "0",
                        "--metrics-bind-address",
                        "0",
                        "--webhook-port",
                        "0",
                        "--retry-period",
                        "1",
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.DEVNULL,
                    )
                )

            async def three_balanced_members() -> dict[int, str] | None:
                with contextlib.suppress(Exception):
                    owners = read_slot_map(await kube.get(LEASES, f"{GROUP}-slots", LEASE_NAMESPACE))
                    shares = sorted(list(owners.values()).count(m) for m in set(owners.values()))
                    if len(owners) == 64 and shares == [21, 21, 22]:
                        return {slot: owner.split("@")[0] for slot, owner in owners.items()}
                return None

            owners = await eventually(three_balanced_members, timeout=60, description="three balanced members")
            for ns in teams:
                await kube.create(MODELSERVINGS, modelserving("llm", roles=[role("decode", gpu=0)]), ns)
            await asyncio.gather(*(wait_available(kube, ns, "llm", 1, timeout=240) for ns in teams))
            assert all(p.returncode is None for p in processes)

            writers = writers_by_namespace(audit_log, set(teams))
            assert sorted(writers) == sorted(teams)
            for ns in teams:
                assert writers[ns] == {owners[namespace_slot(ns)]}, ns
            assert len({w for ws in writers.values() for w in ws}) == 3  # every replica did its share
        finally:
            for p in processes:
                if p.returncode is None:
                    p.terminate()
            for p in processes:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(p.wait(), 30)
                if p.returncode is None:
                    p.kill()
                    await p.wait()
            await kube.close()
