"""The identity the downloader reports is the one the manager's revalidation finds on an unchanged source.

Real ``kthena-py download`` processes against the loopback artifact server, the fake hub and moto's S3, then the
manager's prober on the same source: both go through :mod:`kthena_py.sourceid`, so they must agree exactly.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from kthena_py.api.modelcache import ModelCache
from kthena_py.controllers.modelcache.revalidate import Prober
from kthena_py.download.result import RESULT_LIMIT, FileEntry, Outcome, Reason, render_result
from kthena_py.kube.resources import SECRETS
from kthena_py.sourceid import MAX_ETAG, SourceIdentity, same_content
from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo
from kthena_py.testing.artifacts.s3 import s3_server
from kthena_py.testing.fake import FakeKube

from .conftest import run_download

ACCESS, SECRET = "AKIAKTHENATEST", "kthenaSecretKey0123456789"


@pytest.fixture
async def prober() -> AsyncIterator[tuple[Prober, FakeKube]]:
    kube = FakeKube()
    probe = Prober(kube, timeout=5.0)  # type: ignore[arg-type]
    yield probe, kube
    await probe.close()


async def probed(prober: tuple[Prober, FakeKube], source: str, **secret: str) -> SourceIdentity:
    probe, kube = prober
    spec: dict[str, Any] = {"source": source, "storage": {"persistentVolumeClaim": {"claimName": "c"}}}
    if secret:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}
        kube.put(
            SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}, "data": data}
        )
        spec["sourceSecretRef"] = {"name": "s"}
    mc = ModelCache.model_validate({"metadata": {"name": "m", "namespace": "ns"}, "spec": spec})
    found = await probe.probe(mc, 1.0)
    assert found is not None and found.identity is not None, found
    return found.identity


async def test_http_identity_matches_the_probe_and_survives_a_cached_run(
    server: ArtifactServer, tmp_path: Path, prober: tuple[Prober, FakeKube]
) -> None:
    server.add("/m.gguf", Artifact(b"g" * 5000, etag='"v1"'))
    out = tmp_path / "o"
    run = await run_download(["-s", f"{server.url}/m.gguf", "-o", str(out)])
    assert run.code == 0, run.output
    staged = SourceIdentity.from_json(run.result["identity"])
    assert staged == SourceIdentity('"v1"', 5000)
    assert staged == await probed(prober, f"{server.url}/m.gguf")
    again = await run_download(["-s", f"{server.url}/m.gguf", "-o", str(out)])
    assert again.result["cached"] is True and again.result["identity"] == run.result["identity"]


async def test_hub_identity_is_the_commit_and_total_size(
    server: ArtifactServer, tmp_path: Path, prober: tuple[Prober, FakeKube]
) -> None:
    repo = server.add_repo(
        HubRepo("org/model", {"config.json": b"{}", "w.safetensors": b"w" * 4000}, lfs={"w.safetensors"})
    )
    run = await run_download(
        ["-s", "org/model", "-o", str(tmp_path / "o"), "--files", "config.json"], {"HF_ENDPOINT": server.url}
    )
    assert run.code == 0, run.output
    staged = SourceIdentity.from_json(run.result["identity"])
    assert staged == SourceIdentity(repo.commit, 4002)  # every file of the commit, not only the selection
    assert staged == await probed(prober, "hf://org/model", HF_ENDPOINT=server.url)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        yield endpoint


def seed(endpoint: str, objects: dict[str, bytes]) -> None:
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS, aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    client.create_bucket(Bucket="ids")
    for key, data in objects.items():
        client.put_object(Bucket="ids", Key=key, Body=data)


@pytest.mark.parametrize("source", ["s3://ids/llama", "s3://ids/one.gguf"])
async def test_s3_identity_matches_the_probe(
    s3_endpoint: str, tmp_path: Path, prober: tuple[Prober, FakeKube], source: str
) -> None:
    await asyncio.to_thread(seed, s3_endpoint, {"llama/a.bin": b"a" * 100, "llama/d/b.bin": b"b" * 7, "one.gguf": b"1"})
    env = {"ACCESS_KEY": ACCESS, "SECRET_KEY": SECRET, "ENDPOINT": s3_endpoint}
    run = await run_download(["-s", source, "-o", str(tmp_path / "o")], env)
    assert run.code == 0, run.output
    staged = SourceIdentity.from_json(run.result["identity"])
    assert staged is not None
    now = await probed(prober, source, **env)
    assert staged == now and same_content(staged, now) is True


def test_the_result_with_an_identity_stays_within_the_limit() -> None:
    files = tuple(FileEntry(f"shard-{i:05d}.safetensors", 10**9, "a" * 64) for i in range(200))
    identity = SourceIdentity("e" * 5000, 2 * 10**11, "Tue, 01 Dec 2026 10:00:00 GMT")
    outcome = Outcome(Reason.SUCCEEDED, "m" * 3000, "hf://org/model", "/out", "c" * 40, files, identity=identity)
    text = render_result(outcome)
    assert len(text.encode()) <= RESULT_LIMIT
    doc = json.loads(text)
    assert len(doc["identity"]["etag"]) == MAX_ETAG and doc["identity"]["contentLength"] == 2 * 10**11
    assert SourceIdentity.from_json(doc["identity"]) == identity
