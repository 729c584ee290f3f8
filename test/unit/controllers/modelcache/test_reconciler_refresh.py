"""The reconciler with a real prober against the loopback artifact server: probes only when due, and a restart on
a converged cache writes nothing (``lastRevalidated`` is written only when a probe ran)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from kthena_py.controllers.modelcache.reconciler import CacheReconciler
from kthena_py.controllers.modelcache.revalidate import Prober
from kthena_py.controllers.resources import MODELCACHES
from kthena_py.kube.resources import PERSISTENT_VOLUME_CLAIMS
from kthena_py.testing.artifacts import Artifact, ArtifactServer

from .test_reconciler import CLAIM, World, _cache


@pytest.fixture
async def server() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as srv:
        yield srv


def with_prober(world: World, prober: Prober) -> None:
    old = world.reconciler
    world.reconciler = CacheReconciler(
        old.client, old.cache, old.recorder, old.settings, old.progress, wall_clock=lambda: world.now, prober=prober
    )


def drift(world: World) -> tuple[str, str] | None:
    found = [c for c in world.mc()["status"].get("conditions") or [] if c["type"] == "SourceDrifted"]
    return (found[0]["status"], found[0]["reason"]) if found else None


async def test_probe_when_due_report_drift_and_stay_quiet_after_a_restart(server: ArtifactServer) -> None:
    artifact = server.add("/m.gguf", Artifact(b"m" * 100, etag='"v1"'))
    spec = {"source": f"{server.url}/m.gguf", "revalidationInterval": "10s"}
    spec_doc = _cache(**spec)
    del spec_doc["spec"]["sha256"]
    world = World((MODELCACHES, spec_doc), (PERSISTENT_VOLUME_CLAIMS, CLAIM), now=1000.0)
    prober = Prober(world.kube, timeout=5.0)  # type: ignore[arg-type]
    try:
        with_prober(world, prober)
        await world.reconcile()
        job = world.jobs()[0]
        result = {"ok": True, "files": [{"name": "m.gguf", "size": 100, "sha256": "a" * 64}]}
        result["identity"] = {"etag": '"v1"', "contentLength": 100}
        world.run_job(job, "succeeded", json.dumps(result))
        ready = await world.reconcile()
        assert world.mc()["status"]["sourceETag"] == '"v1"' and server.total_requests("HEAD") == 0
        assert ready is not None and 10 <= ready.requeue_after <= 11  # the first revalidation is due then

        world.now = 1005.0  # not due yet: no request
        await world.reconcile()
        assert server.total_requests("HEAD") == 0 and drift(world) is None

        world.now = 1012.0
        await world.reconcile()
        assert server.total_requests("HEAD") == 1 and drift(world) == ("False", "SourceUnchanged")
        assert world.mc()["status"]["upstream"] == {"etag": '"v1"', "contentLength": 100}

        artifact.etag = '"v2"'
        world.now = 1024.0
        await world.reconcile()
        assert drift(world) == ("True", "SourceChanged") and world.mc()["status"]["phase"] == "Ready"
        assert world.mc()["status"]["upstream"]["etag"] == '"v2"' and len(world.jobs()) == 1
        assert world.recorded().count(("Warning", "SourceChanged")) == 1

        world.restart()  # a new manager on the converged cluster, before the next probe is due
        with_prober(world, prober)
        await world.reconcile()
        assert world.writes() == [] and server.total_requests("HEAD") == 2
    finally:
        await prober.close()
