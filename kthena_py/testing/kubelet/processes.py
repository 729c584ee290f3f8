"""Local processes standing in for containers: one process group each, never outliving their container.

Guarantees: each container process starts in a new session (its own process group), so :func:`signal_group`
reaches whatever it spawned; once the process exits, what is left of its group is killed (as a container runtime
tears down the container's cgroup); :func:`stop_process` sends SIGTERM, waits at most the grace period, then
SIGKILL, and returns only once the process has been reaped. Exit codes of signalled processes are ``128 + N``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["exit_code", "signal_group", "spawn", "stop_process", "wait_process"]


async def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path) -> asyncio.subprocess.Process:
    """Start a container's process, stdout and stderr appended to ``log``.

    Args:
        argv: Program and arguments.
        env: The whole environment (nothing is inherited).
        cwd: Working directory.
        log: Log file.

    Returns:
        The process.

    Raises:
        OSError: The program cannot be started.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group led by ``pid``; a group that is gone is ignored.

    Args:
        pid: The group leader (a process from :func:`spawn`).
        sig: The signal.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def exit_code(returncode: int) -> int:
    """The container exit code of a process return code (``-N`` for signal N becomes ``128 + N``).

    Args:
        returncode: ``Process.returncode``.

    Returns:
        The exit code.
    """
    return 128 - returncode if returncode < 0 else returncode


async def wait_process(proc: asyncio.subprocess.Process) -> int:
    """Wait for the process, then kill what is left of its group.

    Cancelling the wait leaves the process alone (it is :func:`stop_process`'s job to end it gracefully).

    Args:
        proc: A process from :func:`spawn`.

    Returns:
        Its exit code (:func:`exit_code`).
    """
    returncode = await proc.wait()
    signal_group(proc.pid, signal.SIGKILL)
    return exit_code(returncode)


async def stop_process(proc: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM the group, SIGKILL it after ``grace`` seconds, and wait until the process is reaped.

    Args:
        proc: A process from :func:`spawn`.
        grace: Seconds between SIGTERM and SIGKILL (0: SIGKILL at once).
    """
    if proc.returncode is None and grace > 0:
        signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await proc.wait()
    signal_group(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    await proc.wait()
