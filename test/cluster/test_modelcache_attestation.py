"""ModelCache attestations end to end in the cluster tier: keys generated in the test, envelopes in ConfigMaps.

The manager runs as a process with ``--model-attestation`` and a key directory written by the test (the trusted
public key only); the caches are staged by real download Jobs on a mini-kubelet from the loopback hub, as in
``test_modelcache.py``. Under ``enforce`` a cache is Ready only with a good signature over its files' digests; a
tampered envelope keeps it from Ready and a ModelServing naming it stays gated (no pods) until a correct envelope
replaces it in the ConfigMap (read at the next reconcile, at the latest the bounded recheck: ConfigMaps are not
watched). Under ``warn`` a cache with a statement of other digests is Ready with ``AttestationVerified`` False.
Every wait is bounded.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kthena_py.api.modelcache import model_dir
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS
from kthena_py.testing.artifacts import ArtifactServer
from kthena_py.testing.attestation import KeyPair, envelope, keypair
from kthena_py.testing.kubelet import MiniKubelet
from kthena_py.testing.wait import eventually

from .mcutil import (
    RUNNER,
    condition,
    events_of,
    gated_modelserving,
    hub_secret,
    modelcache,
    placement,
    running_manager,
    sha256,
    three_file_repo,
    wait_cache,
    wait_ms_condition,
)
from .msutil import live_pods
from .test_modelcache import CLAIM_STORAGE, PV_PATH, bound_claim, phases, recording, served_digests

pytestmark = pytest.mark.cluster

KEY_ID = "release"


def trusted_key_dir(root: Path, pair: KeyPair) -> Path:
    """A key directory as a mounted Secret gives it: ``<keyid>.pem`` (the public key only)."""
    keys = root / "trusted-keys"
    keys.mkdir()
    (keys / f"{KEY_ID}.pem").write_text(pair.public_pem)
    return keys


async def attestation_configmap(kube: KubeClient, namespace: str, name: str, document: dict[str, object]) -> None:
    body = {"metadata": {"name": name}, "data": {"envelope.json": json.dumps(document)}}
    await kube.create(CONFIGMAPS, body, namespace)


def reference(name: str) -> dict[str, object]:
    return {"configMapKeyRef": {"name": name, "key": "envelope.json"}}


def tampered(document: dict[str, object], digests: dict[str, str]) -> dict[str, object]:
    """``document`` with its statement's weights digest changed after signing (the signature stays)."""
    statement = json.loads(base64.b64decode(str(document["payload"])))
    for subject in statement["subject"]:
        if subject["name"] == "model.safetensors":
            subject["digest"]["sha256"] = sha256(b"other weights")
    assert {s["name"] for s in statement["subject"]} == set(digests)
    return {**document, "payload": base64.b64encode(json.dumps(statement).encode()).decode()}


async def warnings(kube: KubeClient, namespace: str, name: str, reason: str) -> list[KubeObject]:
    return [e for e in await events_of(kube, namespace, name) if e["type"] == "Warning" and e["reason"] == reason]


async def test_enforce_ready_only_with_a_good_signature_and_a_tampered_one_keeps_the_gate_shut(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    pair = keypair("ed25519")
    keys = trusted_key_dir(tmp_path, pair)
    flags = ["--model-attestation", "enforce", "--model-attestation-keys", str(keys)]
    async with ArtifactServer() as server:
        good_repo = server.add_repo(three_file_repo("acme/signed"))
        bad_repo = server.add_repo(three_file_repo("acme/tampered"))
        await hub_secret(kube, namespace, server)
        good_digests, bad_digests = served_digests(good_repo), served_digests(bad_repo)
        await attestation_configmap(kube, namespace, "signed-att", envelope(pair, KEY_ID, files=good_digests))
        bad = tampered(envelope(pair, KEY_ID, files=bad_digests), bad_digests)
        await attestation_configmap(kube, namespace, "tampered-att", bad)
        where = placement([kubelet.node.name])
        async with (
            running_manager(kubeconfig, namespace, tmp_path / "manager.log", extra_args=flags),
            recording(kube, MODELCACHES, namespace, field_selector="metadata.name=tampered") as seen,
        ):
            await kube.create(MODELSERVINGS, gated_modelserving("srv", "tampered"), namespace)
            for name, repo in (("signed", good_repo), ("tampered", bad_repo)):
                doc = modelcache(name, repo, CLAIM_STORAGE, placement=where, attestation=reference(f"{name}-att"))
                await kube.create(MODELCACHES, doc, namespace)

            mc = await wait_cache(kube, namespace, "signed", "Ready")
            verified = condition(mc, "AttestationVerified")
            assert (verified["status"], verified["reason"]) == ("True", "Verified"), verified
            assert KEY_ID in verified["message"]
            assert {f["name"]: f["sha256"] for f in mc["status"]["files"]} == good_digests

            mc = await wait_cache(kube, namespace, "tampered", "Failed")
            verified = condition(mc, "AttestationVerified")
            assert (verified["status"], verified["reason"]) == ("False", "SignatureInvalid"), verified
            assert KEY_ID in verified["message"] and "payload" not in verified["message"]
            degraded, ready = condition(mc, "Degraded"), condition(mc, "Ready")
            assert (degraded["status"], degraded["reason"]) == ("True", "AttestationFailed"), degraded
            assert (ready["status"], ready["reason"]) == ("False", "AttestationFailed"), ready
            # the files are staged and verified by the downloader: only the attestation holds the cache back
            assert {f["name"]: f["sha256"] for f in mc["status"]["files"]} == bad_digests
            staged = kubelet.volume_path(PV_PATH) / model_dir("hf://acme/tampered")
            assert (staged / "model.safetensors").read_bytes() == bad_repo.files["model.safetensors"]

            ms = await wait_ms_condition(kube, namespace, "srv", "ModelCached", "False", "ModelCacheFailed")
            assert "AttestationFailed" in condition(ms, "ModelCached")["message"]
            await eventually(
                lambda: warnings(kube, namespace, "tampered", "AttestationFailed"),
                timeout=60,
                description="Warning AttestationFailed on the tampered cache",
            )
            assert await live_pods(kube, namespace, "srv") == {}
            assert "Ready" not in phases(seen), phases(seen)  # never Ready, not even for a moment

            # A correct envelope in the ConfigMap (not watched) is read at the cache's next reconcile, at the latest
            # the recheck 30 s after the last one.
            good = json.dumps(envelope(pair, KEY_ID, files=bad_digests))
            await kube.patch(CONFIGMAPS, "tampered-att", {"data": {"envelope.json": good}}, namespace)
            mc = await wait_cache(kube, namespace, "tampered", "Ready", timeout=120)
            assert condition(mc, "AttestationVerified")["status"] == "True"
            assert condition(mc, "Degraded")["status"] == "False"
            await wait_ms_condition(kube, namespace, "srv", "ModelCached", "True", "ModelCacheReady")


async def test_warn_serves_a_cache_whose_statement_names_other_digests_with_the_condition_false(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    pair = keypair("p256")
    keys = trusted_key_dir(tmp_path, pair)
    flags = ["--model-attestation", "warn", "--model-attestation-keys", str(keys)]
    async with ArtifactServer() as server:
        repo = server.add_repo(three_file_repo("acme/warned"))
        await hub_secret(kube, namespace, server)
        other = {**served_digests(repo), "model.safetensors": sha256(b"the weights someone signed")}
        await attestation_configmap(kube, namespace, "warned-att", envelope(pair, KEY_ID, files=other))
        doc = modelcache(
            "warned", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]), attestation=reference("warned-att")
        )
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log", extra_args=flags):
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "warned", "Ready")
            verified = condition(mc, "AttestationVerified")
            assert (verified["status"], verified["reason"]) == ("False", "DigestMismatch"), verified
            assert "model.safetensors" in verified["message"] and other["model.safetensors"] in verified["message"]
            assert condition(mc, "Ready")["status"] == "True" and condition(mc, "Degraded")["status"] == "False"
            await eventually(
                lambda: warnings(kube, namespace, "warned", "DigestMismatch"),
                timeout=60,
                description="Warning DigestMismatch on the cache",
            )
