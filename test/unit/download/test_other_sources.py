"""Real ``kthena-py download`` processes for http(s), s3 (moto), pvc:// and local paths, ms://, --remove and
--progress-address."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import boto3
import pytest

from kthena_py.testing.artifacts import Artifact, ArtifactServer
from kthena_py.testing.artifacts.s3 import s3_server

from .conftest import kill_when, run_download, start_download

ACCESS, SECRET = "AKIAKTHENATEST", "kthenaSecretKey0123456789"


async def test_http_one_file_with_sha256(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(200_000)
    server.add("/models/m.gguf", Artifact(data))
    out = tmp_path / "o"
    digest = hashlib.sha256(data).hexdigest()
    run = await run_download(["-s", f"{server.url}/models/m.gguf", "-o", str(out), "--sha256", digest])
    assert run.code == 0, run.output
    assert (out / "m.gguf").read_bytes() == data
    assert run.result["files"] == [{"name": "m.gguf", "size": len(data), "sha256": digest}]
    assert server.counts[("HEAD", "/models/m.gguf")] == 1 and server.counts[("GET", "/models/m.gguf")] == 1


async def test_http_corrupted_byte_against_sha256(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(100_000)
    server.add("/m.gguf", Artifact(data, corrupt=True))
    out = tmp_path / "o"
    result_file = tmp_path / "r.json"
    run = await run_download(
        [
            "-s",
            f"{server.url}/m.gguf",
            "-o",
            str(out),
            "--sha256",
            hashlib.sha256(data).hexdigest(),
            "--result-file",
            str(result_file),
        ]
    )
    assert run.code == 3
    assert json.loads(result_file.read_text())["reason"] == "IntegrityCheckFailed"
    assert sorted(p.name for p in out.iterdir()) == [".kthena-state.json", ".lock"]


async def test_http_redirect_to_another_host_carries_no_credentials(
    server: ArtifactServer, cdn: ArtifactServer, tmp_path: Path
) -> None:
    data = os.urandom(10_000)
    server.add("/m.bin", Artifact(redirect_to=cdn.url))
    cdn.add("/m.bin", Artifact(data))
    run = await run_download(
        ["-s", f"http://user:pw-secret-1@127.0.0.1:{server.port}/m.bin", "-o", str(tmp_path / "o")]
    )
    assert run.code == 0, run.output
    assert all(r.headers.get("Authorization", "").startswith("Basic ") for r in server.requests)
    assert cdn.requests and all("Authorization" not in r.headers for r in cdn.requests)
    assert "pw-secret-1" not in run.output
    assert "pw-secret-1" not in (tmp_path / "o" / ".kthena-complete").read_text()


async def test_http_not_found_and_result_file(server: ArtifactServer, tmp_path: Path) -> None:
    result_file = tmp_path / "r.json"
    run = await run_download(
        ["-s", f"{server.url}/nope.bin", "-o", str(tmp_path / "o"), "--result-file", str(result_file)]
    )
    assert run.code == 5
    assert json.loads(result_file.read_text())["reason"] == "SourceNotFound"


async def test_unreachable_source_is_download_failed(tmp_path: Path) -> None:
    run = await run_download(["-s", "http://127.0.0.1:9/m.bin", "-o", str(tmp_path / "o")])
    assert run.code == 1 and run.result["reason"] == "DownloadFailed"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        yield endpoint


def seed(endpoint: str, bucket: str, objects: dict[str, bytes]) -> None:
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS, aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    client.create_bucket(Bucket=bucket)
    for key, data in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


async def test_s3_prefix_downloads_and_resumes(s3_endpoint: str, tmp_path: Path, server: ArtifactServer) -> None:
    objects = {
        "models/llama/config.json": b"{}",
        "models/llama/weights/a.bin": os.urandom(300_000),
        "models/llama/weights/b.bin": os.urandom(300_000),
        "models/other/x.bin": b"not staged",
    }
    await asyncio.to_thread(seed, s3_endpoint, "bucket", objects)
    out = tmp_path / "o"
    env = {"ACCESS_KEY": ACCESS, "SECRET_KEY": SECRET, "ENDPOINT": s3_endpoint}
    # A partial of b.bin from an earlier, killed run (journalled for the same object version).
    head = await asyncio.to_thread(
        lambda: boto3.client(
            "s3",
            endpoint_url=s3_endpoint,
            aws_access_key_id=ACCESS,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        ).head_object(Bucket="bucket", Key="models/llama/weights/b.bin")
    )
    (out / "weights").mkdir(parents=True)
    (out / "weights" / "b.bin.partial").write_bytes(objects["models/llama/weights/b.bin"][:120_000])
    (out / ".kthena-state.json").write_text(
        json.dumps({"files": {"weights/b.bin": {"identity": f"etag:{head['ETag']}", "complete": False}}})
    )
    run = await run_download(["-s", "s3://bucket/models/llama", "-o", str(out)], env)
    assert run.code == 0, run.output
    for key in ("config.json", "weights/a.bin", "weights/b.bin"):
        assert (out / key).read_bytes() == objects[f"models/llama/{key}"]
    assert not (out / "x.bin").exists()
    assert "resuming" in run.stderr and '"offset": 120000' in run.stderr
    assert SECRET not in run.output and ACCESS not in run.output
    assert SECRET not in (out / ".kthena-complete").read_text()


async def test_s3_kill_then_resume_completes(s3_endpoint: str, tmp_path: Path) -> None:
    big = os.urandom(40_000_000)
    await asyncio.to_thread(seed, s3_endpoint, "killme", {"m/big.bin": big})
    out = tmp_path / "o"
    env = {"AWS_ACCESS_KEY_ID": ACCESS, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ENDPOINT_URL": s3_endpoint}
    proc = await start_download(["-s", "s3://killme/m", "-o", str(out)], env)
    try:
        await kill_when(proc, out / "big.bin.partial", 4 * 1024 * 1024)
    except AssertionError:
        pytest.fail("the S3 download finished before it could be killed")
    assert not (out / ".kthena-complete").exists()
    run = await run_download(["-s", "s3://killme/m", "-o", str(out)], env)
    assert run.code == 0, run.output
    assert "resuming" in run.stderr
    assert hashlib.sha256((out / "big.bin").read_bytes()).hexdigest() == hashlib.sha256(big).hexdigest()


async def test_s3_missing_bucket_and_half_credentials(s3_endpoint: str, tmp_path: Path) -> None:
    env = {"ACCESS_KEY": ACCESS, "SECRET_KEY": SECRET, "ENDPOINT": s3_endpoint}
    missing = await run_download(["-s", "s3://no-such-bucket/x", "-o", str(tmp_path / "a")], env)
    assert missing.code == 5 and missing.result["reason"] == "SourceNotFound", missing.output
    half = await run_download(
        ["-s", "s3://b/x", "-o", str(tmp_path / "b")], {"ACCESS_KEY": ACCESS, "ENDPOINT": s3_endpoint}
    )
    assert half.code == 2 and "Missing credentials" in half.result["message"]


async def test_pvc_and_local_paths(tmp_path: Path) -> None:
    src = tmp_path / "claim" / "models" / "m"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(50_000))
    (src / "sub" / "b.txt").write_text("b")
    relative = str(src).lstrip("/")  # pvc://CLAIM/PATH means /CLAIM/PATH
    run = await run_download(["-s", f"pvc://{relative}", "-o", str(tmp_path / "o1")])
    assert run.code == 0, run.output
    assert (tmp_path / "o1" / "sub" / "b.txt").read_text() == "b"
    assert sorted(f["name"] for f in run.result["files"]) == ["a.bin", "sub/b.txt"]
    # A pvc:// source must be a directory; a local path may be one file.
    one = await run_download(["-s", f"pvc://{relative}/a.bin", "-o", str(tmp_path / "o2")])
    assert one.code == 2 and "directory" in one.result["message"]
    local = await run_download(["-s", str(src / "a.bin"), "-o", str(tmp_path / "o3")])
    assert local.code == 0 and (tmp_path / "o3" / "a.bin").read_bytes() == (src / "a.bin").read_bytes()
    gone = await run_download(["-s", f"pvc://{relative}-missing", "-o", str(tmp_path / "o4")])
    assert gone.code == 5 and gone.result["reason"] == "SourceNotFound"


async def test_unsupported_sources(tmp_path: Path) -> None:
    ms = await run_download(["-s", "ms://org/model", "-o", str(tmp_path / "o")])
    assert ms.code == 4 and ms.result["reason"] == "UnsupportedSource"
    assert "modelscope" in ms.result["message"]
    ftp = await run_download(["-s", "ftp://host/x", "-o", str(tmp_path / "o")])
    assert ftp.code == 4 and "ftp://" in ftp.result["message"]


async def test_remove(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "w.bin").write_bytes(b"x" * 10)
    out = tmp_path / "cache"
    assert (await run_download(["-s", str(src), "-o", str(out)])).code == 0
    stranger = tmp_path / "stranger"
    (stranger / "d").mkdir(parents=True)
    (stranger / "d" / "keep.txt").write_text("mine")
    refused = await run_download(["--remove", "-o", str(stranger)])
    assert refused.code == 8 and (stranger / "d" / "keep.txt").exists()
    root = await run_download(["--remove", "--force", "-o", "/"])
    assert root.code == 8
    removed = await run_download(["--remove", "-o", str(out)])
    assert removed.code == 0 and not out.exists()
    again = await run_download(["--remove", "-o", str(out)])
    assert again.code == 0  # idempotent
    forced = await run_download(["--remove", "--force", "-o", str(stranger)])
    assert forced.code == 0 and not stranger.exists() and src.exists()


async def test_progress_address_serves_progress(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(2_000_000)
    server.add("/slow.bin", Artifact(data, throttle=1_000_000))
    sock_port = await asyncio.to_thread(_free_port)
    proc = await start_download(
        ["-s", f"{server.url}/slow.bin", "-o", str(tmp_path / "o"), "--progress-address", f"127.0.0.1:{sock_port}"]
    )
    seen: list[dict[str, object]] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(f"http://127.0.0.1:{sock_port}/progress") as response:
                    seen.append(await response.json())
            except aiohttp.ClientError:
                pass
            if seen and seen[-1]["phase"] == "Downloading" and 0 < int(seen[-1]["bytesDone"]) < len(data):  # type: ignore[call-overload]
                break
            await asyncio.sleep(0.05)
    assert await proc.wait() == 0
    last = seen[-1]
    assert last["phase"] == "Downloading" and last["bytesTotal"] == len(data) and last["filesTotal"] == 1
    assert 0 < int(last["bytesDone"]) < len(data)  # type: ignore[call-overload]
    assert set(last) == {
        "bytesDone",
        "bytesTotal",
        "filesDone",
        "filesTotal",
        "rateBytesPerSecond",
        "etaSeconds",
        "phase",
    }


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
