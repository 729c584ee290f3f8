"""The ModelCache reconciler with attestations over FakeKube: the live ConfigMap read, enforce and warn, the
recheck, the metric, and zero writes after a restart on a converged cache."""

from __future__ import annotations

import base64
import json
from typing import Any

from kthena_py.attestation import Mode
from kthena_py.controllers.modelcache import Settings
from kthena_py.controllers.resources import MODELCACHES
from kthena_py.kube.resources import CONFIGMAPS, PERSISTENT_VOLUME_CLAIMS
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.attestation import envelope, keypair, trusted

from .test_reconciler import CLAIM, SHA, World, _cache, _ok

KEY = keypair("ed25519")
KEYS = trusted(("release", KEY))
REF = {"configMapKeyRef": {"name": "llama-att", "key": "envelope.json"}}
LABELS = {"namespace": "ns", "name": "llama"}


def _configmap(document: dict[str, Any], *, binary: bool = False, key: str = "envelope.json") -> dict[str, Any]:
    text = json.dumps(document)
    data = {"binaryData": {key: base64.b64encode(text.encode()).decode()}} if binary else {"data": {key: text}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llama-att", "namespace": "ns"}, **data}


GOOD = envelope(KEY, "release", files={"m.gguf": SHA})
WRONG = envelope(KEY, "release", files={"m.gguf": "d" * 64})


def _world(mode: Mode, *objects: tuple[Any, dict[str, Any]], **spec: Any) -> World:
    settings = Settings(attestation_mode=mode, attestation_keys=KEYS)
    return World((MODELCACHES, _cache(**spec)), (PERSISTENT_VOLUME_CLAIMS, CLAIM), *objects, settings=settings)


async def _staged(world: World) -> Any:
    await world.reconcile()
    (job,) = world.jobs()
    world.run_job(job, "succeeded", _ok())
    return await world.reconcile()


def _verified(world: World) -> tuple[str, str]:
    found = next(c for c in world.mc()["status"]["conditions"] if c["type"] == "AttestationVerified")
    return found["status"], found["reason"]


def _configmap_reads(world: World) -> int:
    return sum(1 for c in world.kube.calls if c.rt == CONFIGMAPS and c.verb == "get")


async def test_enforce_with_a_good_envelope_is_ready_and_a_restart_writes_nothing() -> None:
    world = _world("enforce", (CONFIGMAPS, _configmap(GOOD)), attestation=REF)
    staged = await _staged(world)  # the only timer left is the source's 1 h revalidation: no recheck
    assert staged is not None and staged.requeue_after >= 3600
    assert world.mc()["status"]["phase"] == "Ready" and _verified(world) == ("True", "Verified")
    assert REGISTRY.get_sample_value("kthena_modelcache_attestation_verified", LABELS) == 1.0
    world.restart()
    await world.reconcile()
    assert world.writes() == [] and world.recorded() == []
    assert _configmap_reads(world) == 1  # one live GET per reconcile, ConfigMaps are not cached


async def test_enforce_with_a_wrong_digest_holds_rechecks_and_recovers_when_the_configmap_is_fixed() -> None:
    world = _world("enforce", (CONFIGMAPS, _configmap(WRONG, binary=True)), attestation=REF)
    result = await _staged(world)
    status = world.mc()["status"]
    assert status["phase"] == "Failed" and _verified(world) == ("False", "DigestMismatch")
    assert result is not None and result.requeue_after == 30.0
    assert ("Warning", "AttestationFailed") in world.recorded()
    assert REGISTRY.get_sample_value("kthena_modelcache_attestation_verified", LABELS) == 0.0
    world.restart()
    await world.reconcile()
    assert world.writes() == [] and world.recorded() == []  # the recheck changes nothing while nothing changed
    world.kube.put(CONFIGMAPS, _configmap(GOOD))
    fixed = await world.reconcile()  # the only timer left is the source's 1 h revalidation: no recheck
    assert fixed is not None and fixed.requeue_after >= 3600
    assert world.mc()["status"]["phase"] == "Ready" and ("Normal", "Verified") in world.recorded()


async def test_a_missing_configmap_or_key_is_not_found() -> None:
    world = _world("warn", attestation=REF)
    await _staged(world)
    assert world.mc()["status"]["phase"] == "Ready" and _verified(world) == ("False", "AttestationNotFound")
    world.kube.put(CONFIGMAPS, _configmap(GOOD, key="other.json"))
    await world.reconcile()
    message = next(c for c in world.mc()["status"]["conditions"] if c["type"] == "AttestationVerified")["message"]
    assert "has no key envelope.json" in message


async def test_a_cache_without_a_reference_never_reads_a_configmap() -> None:
    world = _world("warn")
    await _staged(world)
    assert _verified(world) == ("False", "NoAttestation") and _configmap_reads(world) == 0
