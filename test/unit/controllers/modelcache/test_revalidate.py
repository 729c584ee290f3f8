"""The revalidation prober against real loopback servers: the artifact server, the fake hub, moto's S3."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import pytest
from aiohttp import web

from kthena_py.api.modelcache import ModelCache
from kthena_py.controllers.modelcache.revalidate import Prober, credentials_of, origin
from kthena_py.kube.errors import ApiError
from kthena_py.kube.resources import SECRETS
from kthena_py.sourceid import SourceIdentity
from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo
from kthena_py.testing.artifacts.s3 import s3_server
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.fake.faults import refuse

ACCESS, SECRET = "AKIAKTHENATEST", "kthenaSecretKey0123456789"
TOKEN = "hf_probe_token_0123456789"


def cache(source: str, secret: str | None = None, revision: str | None = None) -> ModelCache:
    spec: dict[str, Any] = {"source": source, "storage": {"persistentVolumeClaim": {"claimName": "models"}}}
    if secret:
        spec["sourceSecretRef"] = {"name": secret}
    if revision:
        spec["revision"] = revision
    return ModelCache.model_validate({"metadata": {"name": "m", "namespace": "ns", "uid": "u"}, "spec": spec})


def secret(kube: FakeKube, name: str, **data: str) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    kube.put(
        SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "ns"}, "data": encoded}
    )


@pytest.fixture
async def server() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as srv:
        yield srv


@pytest.fixture
async def prober() -> AsyncIterator[tuple[Prober, FakeKube]]:
    kube = FakeKube()
    probe = Prober(kube, concurrency=2, timeout=5.0)  # type: ignore[arg-type]
    yield probe, kube
    await probe.close()


async def test_http_is_one_head_and_follows_the_etag(server: ArtifactServer, prober: tuple[Prober, FakeKube]) -> None:
    probe, _ = prober
    artifact = server.add("/m.gguf", Artifact(b"x" * 1000, etag='"v1"'))
    first = await probe.probe(cache(f"{server.url}/m.gguf"), 1.0)
    assert first is not None and first.identity == SourceIdentity('"v1"', 1000)
    artifact.etag, artifact.content = '"v2"', b"y" * 1200
    second = await probe.probe(cache(f"{server.url}/m.gguf"), 1.0)
    assert second is not None and second.identity == SourceIdentity('"v2"', 1200)
    assert server.counts[("HEAD", "/m.gguf")] == 2 and server.total_requests("GET") == 0


async def test_a_missing_file_or_server_is_a_failed_probe_never_an_exception(
    server: ArtifactServer, prober: tuple[Prober, FakeKube]
) -> None:
    probe, _ = prober
    missing = await probe.probe(cache(f"http://user:pw@127.0.0.1:{server.url.rsplit(':', 1)[1]}/nothing"), 1.0)
    assert missing is not None and missing.error is not None and "404" in missing.error
    assert "pw" not in missing.error
    unreachable = await probe.probe(cache("http://127.0.0.1:9/m.gguf"), 1.0)
    assert unreachable is not None and unreachable.error is not None and unreachable.identity is None
    no_secret = await probe.probe(cache(f"{server.url}/m.gguf", secret="absent"), 1.0)
    assert no_secret is not None and no_secret.error is not None and "Secret absent" in no_secret.error


async def test_basic_credentials_stay_on_their_origin(server: ArtifactServer, prober: tuple[Prober, FakeKube]) -> None:
    probe, _ = prober
    async with ArtifactServer() as cdn:
        cdn.add("/m.gguf", Artifact(b"z" * 10, etag='"cdn"'))
        server.add("/m.gguf", Artifact(b"", redirect_to=cdn.url))
        host_port = server.url.split("://", 1)[1]
        found = await probe.probe(cache(f"http://alice:s3cret@{host_port}/m.gguf"), 1.0)
        assert found is not None and found.identity == SourceIdentity('"cdn"', 10)
        assert any("Authorization" in r.headers for r in server.requests)  # sent to its own origin
        assert not any("Authorization" in r.headers for r in cdn.requests)  # never to the other


async def test_hub_revision_with_the_token_from_the_secret(
    server: ArtifactServer, prober: tuple[Prober, FakeKube]
) -> None:
    probe, kube = prober
    repo = server.add_repo(
        HubRepo("org/model", {"config.json": b"{}", "w.safetensors": b"w" * 300}, lfs={"w.safetensors"}, token=TOKEN)
    )
    secret(kube, "hub", HF_ENDPOINT=server.url, HF_TOKEN=TOKEN)
    found = await probe.probe(cache("hf://org/model", secret="hub"), 1.0)
    assert found is not None and found.identity == SourceIdentity(repo.commit, 302)
    assert server.counts[("GET", "/api/models/org/model/revision/main")] == 1
    assert server.total_requests("HEAD") == 0 and not [r for r in server.requests if "/resolve/" in r.path]
    secret(kube, "nohub", HF_ENDPOINT=server.url)
    denied = await probe.probe(cache("hf://org/model", secret="nohub"), 1.0)
    assert denied is not None and denied.error is not None and "401" in denied.error
    pinned = await probe.probe(cache("hf://org/model", secret="hub", revision="nope"), 1.0)
    assert pinned is not None and pinned.error is not None and "404" in pinned.error


async def test_sources_that_are_not_remote_or_not_supported(prober: tuple[Prober, FakeKube]) -> None:
    probe, _ = prober
    assert await probe.probe(cache("pvc://models/llama"), 1.0) is None
    assert await probe.probe(cache("/mnt/llama"), 1.0) is None
    ms = await probe.probe(cache("ms://org/model"), 1.0)
    assert ms is not None and ms.unsupported is not None and ms.identity is None


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        yield endpoint


def seed(endpoint: str, objects: dict[str, bytes]) -> None:
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS, aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    client.create_bucket(Bucket="probe")
    for key, data in objects.items():
        client.put_object(Bucket="probe", Key=key, Body=data)


async def test_s3_prefix_and_object(s3_endpoint: str, prober: tuple[Prober, FakeKube]) -> None:
    probe, kube = prober
    await asyncio.to_thread(seed, s3_endpoint, {"m/a.bin": b"a" * 10, "m/b.bin": b"b" * 20, "one.gguf": b"o" * 5})
    secret(kube, "s3", ENDPOINT=s3_endpoint, ACCESS_KEY=ACCESS, SECRET_KEY=SECRET)
    prefix = await probe.probe(cache("s3://probe/m", secret="s3"), 1.0)
    assert prefix is not None and prefix.identity is not None, prefix
    assert prefix.identity.content_length == 30 and str(prefix.identity.etag).startswith("sha256:")
    one = await probe.probe(cache("s3://probe/one.gguf", secret="s3"), 1.0)
    assert one is not None and one.identity is not None and one.identity.content_length == 5
    assert one.identity.last_modified is not None and one.identity.etag is not None
    missing = await probe.probe(cache("s3://nobucket/m", secret="s3"), 1.0)
    assert missing is not None and missing.error is not None and SECRET not in missing.error


async def test_s3_without_botocore_is_unsupported(
    prober: tuple[Prober, FakeKube], monkeypatch: pytest.MonkeyPatch
) -> None:
    probe, _ = prober
    monkeypatch.setitem(sys.modules, "botocore.session", None)  # the manager's image: no download extra
    found = await probe.probe(cache("s3://probe/m"), 1.0)
    assert found is not None and found.unsupported is not None and "kthena-py[revalidate]" in found.unsupported


async def test_probes_are_bounded_across_caches() -> None:
    running = 0
    most = 0

    async def head(_: web.Request) -> web.Response:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return web.Response(headers={"ETag": '"e"'})

    app = web.Application()
    app.router.add_route("HEAD", "/{name}", head)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    probe = Prober(FakeKube(), concurrency=2, timeout=5.0)  # type: ignore[arg-type]
    try:
        found = await asyncio.gather(*(probe.probe(cache(f"http://127.0.0.1:{port}/f{i}"), 1.0) for i in range(8)))
    finally:
        await probe.close()
        await runner.cleanup()
    assert all(f is not None and f.identity == SourceIdentity('"e"') for f in found)
    assert most == 2


def test_credentials_and_origins() -> None:
    creds = credentials_of({"HF_ENDPOINT": "http://hub.test/", "HF_AUTH_TOKEN": "", "HF_TOKEN": "t", "ENDPOINT": "e"})
    assert creds.hf_endpoint == "http://hub.test" and creds.hf_token == "t" and creds.endpoint == "e"
    assert "t" not in repr(creds).replace("http://hub.test", "").replace("Credentials", "").replace("endpoint", "")
    assert origin("https://H.test/x") == origin("https://h.test:443/y")
    assert origin("http://h.test/x") != origin("https://h.test/x")


async def test_a_secret_the_manager_may_not_read_is_a_failed_probe_that_says_how_to_grant_it(
    server: ArtifactServer, prober: tuple[Prober, FakeKube]
) -> None:
    probe, kube = prober
    secret(kube, "hub", HF_TOKEN=TOKEN)
    kube.intercept(refuse(ApiError(403, "Forbidden", "secrets is forbidden"), "get", SECRETS))
    found = await probe.probe(cache(f"{server.url}/m.gguf", secret="hub"), 1.0)
    assert found is not None and found.error is not None and found.identity is None
    assert "403 Forbidden" in found.error and "modelCache.revalidation.readSourceSecrets" in found.error
    assert server.total_requests("HEAD") == 0  # no anonymous request instead of the credentialed one
