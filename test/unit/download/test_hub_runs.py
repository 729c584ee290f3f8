"""Real ``kthena-py download`` processes against the fake hub: verify, marker, zero requests, corruption, resume,
LFS digests, and the token's scope."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo

from .conftest import kill_when, run_download, start_download

TOKEN = "hf_kthenaTestToken0123456789"


def three_file_repo(repo_id: str = "org/model", **kwargs: object) -> HubRepo:
    files = {
        "config.json": b'{"architectures": ["X"]}',
        "model.safetensors": os.urandom(600_000),
        "tokenizer/tokenizer.json": os.urandom(20_000),
    }
    return HubRepo(repo_id, files, lfs={"model.safetensors"}, **kwargs)  # type: ignore[arg-type]


def marker(out: Path) -> dict[str, object]:
    return json.loads((out / ".kthena-complete").read_text())


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*") if p.is_file() and not p.name.startswith((".lock", ".kthena-state")))


async def test_three_file_model_verifies_writes_marker_and_a_second_run_makes_no_request(
    server: ArtifactServer, tmp_path: Path
) -> None:
    repo = server.add_repo(three_file_repo())
    out = tmp_path / "out"
    result_file = tmp_path / "result.json"
    env = {"HF_ENDPOINT": server.url}
    run = await run_download(["-s", "hf://org/model", "-o", str(out), "--result-file", str(result_file)], env)
    assert run.code == 0, run.output
    for name, data in repo.files.items():
        assert (out / name).read_bytes() == data
    doc = marker(out)
    assert doc["source"] == "hf://org/model"
    assert doc["revision"] == {"requested": None, "resolved": repo.commit}
    assert {f["name"]: f["sha256"] for f in doc["files"]} == {  # type: ignore[union-attr]
        n: hashlib.sha256(d).hexdigest() for n, d in repo.files.items()
    }
    assert doc["totalSize"] == sum(len(d) for d in repo.files.values())
    result = json.loads(result_file.read_text())
    assert result["phase"] == "Succeeded" and result["fileCount"] == 3 and result["revision"] == repo.commit
    assert not list(out.rglob("*.partial"))
    # Each file was fetched once, from the commit's resolve URL.
    assert server.counts[("GET", f"/org/model/resolve/{repo.commit}/model.safetensors")] == 1

    seen = server.total_requests()
    again = await run_download(["-s", "hf://org/model", "-o", str(out), "--result-file", str(result_file)], env)
    assert again.code == 0, again.output
    assert server.total_requests() == seen  # zero network requests
    assert json.loads(result_file.read_text())["cached"] is True


async def test_corrupted_byte_fails_with_nothing_at_the_final_path(server: ArtifactServer, tmp_path: Path) -> None:
    repo = server.add_repo(three_file_repo())
    # The hub reports the true LFS sha256, but serves one flipped byte.
    server.add("/org/model/resolve/model.safetensors", Artifact(repo.files["model.safetensors"], corrupt=True))
    out = tmp_path / "out"
    result_file = tmp_path / "result.json"
    run = await run_download(
        ["-s", "org/model", "-o", str(out), "--result-file", str(result_file), "-w", "1"], {"HF_ENDPOINT": server.url}
    )
    assert run.code == 3, run.output
    assert json.loads(result_file.read_text())["reason"] == "IntegrityCheckFailed"
    assert not (out / "model.safetensors").exists()
    assert not (out / "model.safetensors.partial").exists()
    assert not (out / ".kthena-complete").exists()


async def test_wrong_lfs_digest_fails_and_right_one_verifies(server: ArtifactServer, tmp_path: Path) -> None:
    good = server.add_repo(three_file_repo("org/good"))
    bad = server.add_repo(three_file_repo("org/bad", lfs_sha256_override={"model.safetensors": "ab" * 32}))
    env = {"HF_ENDPOINT": server.url}
    ok = await run_download(["-s", "hf://org/good", "-o", str(tmp_path / "good")], env)
    assert ok.code == 0 and "lfs" in ok.stderr  # the log says which digests verified the download
    assert (tmp_path / "good" / "model.safetensors").read_bytes() == good.files["model.safetensors"]
    fail = await run_download(["-s", "hf://org/bad", "-o", str(tmp_path / "bad")], env)
    assert fail.code == 3 and fail.result["reason"] == "IntegrityCheckFailed", fail.output
    assert "ab" * 32 in fail.result["message"]
    assert not (tmp_path / "bad" / "model.safetensors").exists()
    assert not (tmp_path / "bad" / ".kthena-complete").exists()
    assert bad.files  # the good small files may stay; the marker never appears


async def test_killed_run_is_never_complete_and_resumes_with_a_range(server: ArtifactServer, tmp_path: Path) -> None:
    repo = server.add_repo(three_file_repo())
    big = os.urandom(3_000_000)
    repo.files["model.safetensors"] = big
    throttled = server.add(
        "/org/model/resolve/model.safetensors",
        Artifact(big, etag=f'"{hashlib.sha256(big).hexdigest()}"', throttle=2_000_000),
    )
    out = tmp_path / "out"
    env = {"HF_ENDPOINT": server.url}
    proc = await start_download(["-s", "hf://org/model", "-o", str(out)], env)
    await kill_when(proc, out / "model.safetensors.partial", 1_100_000)
    assert not (out / ".kthena-complete").exists()
    assert not (out / "model.safetensors").exists()
    partial = (out / "model.safetensors.partial").stat().st_size
    assert 0 < partial < len(big)

    throttled.throttle = None
    before = len(server.requests)
    run = await run_download(["-s", "hf://org/model", "-o", str(out)], env)
    assert run.code == 0, run.output
    assert (out / "model.safetensors").read_bytes() == big
    ranged = [
        r.headers.get("Range")
        for r in server.requests[before:]
        if r.path.endswith("/model.safetensors") and r.method == "GET"
    ]
    assert ranged == [f"bytes={partial}-"]  # one request, from where the killed run's partial ends
    assert marker(out)["totalSize"] == sum(len(d) for d in repo.files.values())


async def test_token_reaches_the_hub_not_the_cdn_and_is_never_written(
    server: ArtifactServer, cdn: ArtifactServer, tmp_path: Path
) -> None:
    repo = server.add_repo(three_file_repo(token=TOKEN, cdn=cdn.url))
    cdn.add(f"/cdn/org/model/{repo.commit}/model.safetensors", Artifact(repo.files["model.safetensors"]))
    out = tmp_path / "out"
    result_file = tmp_path / "result.json"
    run = await run_download(
        ["-s", "hf://org/model", "-o", str(out), "--result-file", str(result_file)],
        {"HF_ENDPOINT": server.url, "HF_AUTH_TOKEN": TOKEN},
    )
    assert run.code == 0, run.output
    assert (out / "model.safetensors").read_bytes() == repo.files["model.safetensors"]
    hub_auth = {r.headers.get("Authorization") for r in server.requests}
    assert hub_auth == {f"Bearer {TOKEN}"}  # every hub request (API and resolve) carried it
    assert cdn.requests and all("Authorization" not in r.headers for r in cdn.requests)
    assert all(TOKEN not in json.dumps(r.headers) for r in cdn.requests)
    for text in (run.stdout, run.stderr, result_file.read_text(), (out / ".kthena-complete").read_text()):
        assert TOKEN not in text
    assert TOKEN not in (out / ".kthena-state.json").read_text()


async def test_without_the_token_the_hub_denies(server: ArtifactServer, tmp_path: Path) -> None:
    server.add_repo(three_file_repo(token=TOKEN))
    run = await run_download(["-s", "hf://org/model", "-o", str(tmp_path / "o")], {"HF_ENDPOINT": server.url})
    assert run.code == 5 and run.result["reason"] == "SourceNotFound", run.output  # the hub hides private repos


async def test_config_json_wins_over_env(server: ArtifactServer, tmp_path: Path) -> None:
    server.add_repo(three_file_repo(token=TOKEN))
    config = json.dumps({"hf_endpoint": server.url, "hf_token": TOKEN})
    run = await run_download(
        ["-s", "org/model", "-o", str(tmp_path / "o"), "-c", config],
        {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_AUTH_TOKEN": "hf_wrongwrongwrong"},
    )
    assert run.code == 0, run.output
    assert TOKEN not in run.output


async def test_files_selection_and_revision(server: ArtifactServer, tmp_path: Path) -> None:
    repo = server.add_repo(three_file_repo())
    repo.refs["v1"] = repo.commit
    out = tmp_path / "o"
    run = await run_download(
        ["-s", "org/model", "-o", str(out), "--files", "config.json", "--files", "tokenizer/*", "--revision", "v1"],
        {"HF_ENDPOINT": server.url},
    )
    assert run.code == 0, run.output
    assert leftovers(out) == [".kthena-complete", "config.json", "tokenizer.json"]
    assert marker(out)["revision"] == {"requested": "v1", "resolved": repo.commit}
    missing = await run_download(
        ["-s", "org/model", "-o", str(tmp_path / "m"), "--revision", "nope"], {"HF_ENDPOINT": server.url}
    )
    assert missing.code == 5 and "revision" in missing.result["message"]


async def test_two_processes_on_one_directory(server: ArtifactServer, tmp_path: Path) -> None:
    server.add_repo(three_file_repo())
    out = tmp_path / "o"
    env = {"HF_ENDPOINT": server.url}
    first, second = await asyncio.gather(
        run_download(["-s", "org/model", "-o", str(out)], env), run_download(["-s", "org/model", "-o", str(out)], env)
    )
    assert first.code == 0 and second.code == 0, first.output + second.output
    assert sorted([first.result["cached"], second.result["cached"]]) == [False, True]
    assert server.counts[("GET", "/api/models/org/model")] == 1


async def test_a_killed_large_file_written_with_direct_io_resumes_and_verifies(
    server: ArtifactServer, tmp_path: Path
) -> None:
    """The large-file path (4 MiB blocks, direct I/O where the filesystem allows it) survives a SIGKILL too."""
    repo = server.add_repo(three_file_repo())
    big = os.urandom(66 * 1024 * 1024 + 4321)  # over the large-file threshold, with an unaligned tail
    repo.files["model.safetensors"] = big
    throttled = server.add(
        "/org/model/resolve/model.safetensors",
        Artifact(big, etag=f'"{hashlib.sha256(big).hexdigest()}"', throttle=16 * 1024 * 1024),
    )
    out = tmp_path / "out"
    env = {"HF_ENDPOINT": server.url}
    proc = await start_download(["-s", "hf://org/model", "-o", str(out), "--direct-io", "on"], env)
    await kill_when(proc, out / "model.safetensors.partial", 4 * 1024 * 1024)
    assert not (out / ".kthena-complete").exists()
    assert not (out / "model.safetensors").exists()
    partial = (out / "model.safetensors.partial").stat().st_size
    assert 0 < partial < len(big)

    throttled.throttle = None
    before = len(server.requests)
    run = await run_download(["-s", "hf://org/model", "-o", str(out), "--direct-io", "on"], env)
    assert run.code == 0, run.output
    assert (out / "model.safetensors").read_bytes() == big
    ranged = [
        r.headers.get("Range")
        for r in server.requests[before:]
        if r.path.endswith("/model.safetensors") and r.method == "GET"
    ]
    assert ranged == [f"bytes={partial}-"]
    assert marker(out)["totalSize"] == sum(len(d) for d in repo.files.values())
