"""Fixtures for the downloader's tests: a loopback artifact server (with the fake hub) and a runner that starts
``python -m kthena_py download`` as a real process, awaited without blocking the servers' event loop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kthena_py.testing.artifacts import ArtifactServer

ROOT = Path(__file__).resolve().parents[3]
# Keep the child's environment free of the machine's own credentials and endpoints.
_SCRUB = ("HF_", "AWS_", "ACCESS_KEY", "SECRET_KEY", "ENDPOINT", "MS_", "HUGGING")


@dataclass
class Run:
    """A finished downloader process."""

    code: int
    stdout: str
    stderr: str
    result: dict[str, Any]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env["HF_HOME"] = env.get("HF_HOME_TEST", "/nonexistent-hf-home")
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra or {})
    return env


def command(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "kthena_py", "download", *args]


async def run_download(args: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60) -> Run:
    proc = await asyncio.create_subprocess_exec(
        *command(args),
        env=child_env(env),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    stdout, stderr = out.decode(), err.decode()
    last = stdout.strip().splitlines()[-1] if stdout.strip() else "{}"
    assert proc.returncode is not None
    return Run(proc.returncode, stdout, stderr, json.loads(last))


async def start_download(args: Sequence[str], env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *command(args),
        env=child_env(env),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def kill_when(proc: asyncio.subprocess.Process, path: Path, min_size: int, timeout: float = 30) -> None:
    """SIGKILL ``proc`` once ``path`` holds at least ``min_size`` bytes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if path.exists() and path.stat().st_size >= min_size:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            return
        if proc.returncode is not None:
            raise AssertionError(f"the downloader ended ({proc.returncode}) before {path} reached {min_size} bytes")
        await asyncio.sleep(0.02)
    proc.kill()
    await proc.wait()
    raise AssertionError(f"{path} never reached {min_size} bytes")


@pytest.fixture
async def server() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as srv:
        yield srv


@pytest.fixture
async def cdn() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as srv:
        yield srv
