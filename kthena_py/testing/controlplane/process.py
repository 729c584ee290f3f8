"""Child processes of the control plane: start, watch, stop; loopback ports.

Guarantees:

* Each component runs in its own session and process group (``start_new_session=True``), so a
  Ctrl-C in the terminal does not reach it and stopping it reaches every process it spawned.
* All output (stdout and stderr) of a component is appended to ``<log_dir>/<name>.log``; the file is
  kept after the process stops.
* :meth:`ManagedProcess.stop` sends SIGTERM to the process group, waits ``timeout`` seconds, then
  sends SIGKILL, and always reaps the child. Signals are only sent while the group leader is still
  our un-reaped child, so a recycled pid can never be hit. Nothing is ever killed by name.
* Every process started here is also stopped by an ``atexit`` hook if the interpreter exits normally
  without stopping it first.
* :func:`free_ports` binds ``('127.0.0.1', 0)``: ports are loopback ports that were free a moment ago.
  Another process can still grab one before our child binds it (a "port race"); callers detect that
  via :class:`ProcessExitedError` and retry.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

__all__ = [
    "ManagedProcess",
    "ProcessExitedError",
    "StartupTimeoutError",
    "free_ports",
    "listening_sockets",
    "process_start_ticks",
    "wait_for",
]

T = TypeVar("T")

_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


class ProcessExitedError(RuntimeError):
    """A component exited while it was expected to run.

    Attributes:
        name: Component name.
        returncode: Its exit status (negative: killed by that signal).
        log_tail: The last lines of its log.
        log_path: Where its whole log is.
    """

    def __init__(self, name: str, returncode: int, log_path: Path, log_tail: str) -> None:
        super().__init__(f"{name} exited with status {returncode}; log: {log_path}\n--- last lines ---\n{log_tail}")
        self.name = name
        self.returncode = returncode
        self.log_path = log_path
        self.log_tail = log_tail

    @property
    def port_in_use(self) -> bool:
        """Whether the log suggests a lost port race (another process bound our port first)."""
        return "address already in use" in self.log_tail.lower()


class StartupTimeoutError(TimeoutError):
    """A readiness condition did not hold within its timeout."""


def free_ports(count: int) -> list[int]:
    """Reserve ``count`` distinct free TCP ports on 127.0.0.1.

    All sockets are held open until every port is chosen, so the ports are distinct.

    Args:
        count: Number of ports.

    Returns:
        The port numbers (released again; bind them soon).
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class ManagedProcess:
    """One component process with its log file.

    Args:
        name: Component name; also the log file stem.
        args: Program and arguments.
        log_dir: Directory of the log file.
        env: Extra environment variables (merged over ``os.environ``).
        cwd: Working directory (default: the log directory's parent).
    """

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.args = [str(a) for a in args]
        self.log_path = log_dir / f"{name}.log"
        self._env = dict(env or {})
        self._cwd = cwd or log_dir.parent
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._start_ticks: int | None = None

    @property
    def pid(self) -> int | None:
        """Process id, or None before :meth:`start`."""
        return self._popen.pid if self._popen else None

    @property
    def start_ticks(self) -> int | None:
        """Start time of the process (see :func:`process_start_ticks`), or None before :meth:`start`."""
        return self._start_ticks

    @property
    def returncode(self) -> int | None:
        """Exit status once it exited (negative: killed by that signal), else None."""
        return self._popen.poll() if self._popen else None

    def alive(self) -> bool:
        """Whether the process was started and has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def start(self) -> None:
        """Start the process, appending its output to :attr:`log_path`."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"### {time.strftime('%H:%M:%S')} starting: {' '.join(self.args)}\n".encode())
        self._log.flush()
        env = {**os.environ, **self._env}
        self._popen = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self._cwd,
            env=env,
        )
        self._start_ticks = process_start_ticks(self._popen.pid)
        with _LIVE_LOCK:
            _LIVE.add(self)

    def log_tail(self, lines: int = 40) -> str:
        """Return the last ``lines`` lines of the log.

        Args:
            lines: How many lines.

        Returns:
            The text ("" if there is no log yet).
        """
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                data = f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(data.splitlines()[-lines:])

    def check(self) -> None:
        """Raise if the process has exited.

        Raises:
            ProcessExitedError: It exited (or was never started).
        """
        if self._popen is None:
            raise ProcessExitedError(self.name, -1, self.log_path, "(never started)")
        rc = self._popen.poll()
        if rc is not None:
            raise ProcessExitedError(self.name, rc, self.log_path, self.log_tail())

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._popen is not None
        # Only while the leader is un-reaped: its pid (= pgid) cannot have been recycled.
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, sig)

    def terminate(self) -> None:
        """Send SIGTERM to the process group without waiting."""
        if self._popen is not None and self._popen.poll() is None:
            self._signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the process group: SIGTERM, wait up to ``timeout`` s, then SIGKILL; reap it.

        Safe to call more than once and on a process that already exited.

        Args:
            timeout: Grace period in seconds before SIGKILL.

        Returns:
            The exit status, or None if it was never started.
        """
        if self._popen is None:
            return None
        try:
            if self._popen.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self._popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self._popen.wait()
            return self._popen.returncode
        finally:
            if self._log is not None:
                with contextlib.suppress(OSError):
                    self._log.write(
                        f"### {time.strftime('%H:%M:%S')} stopped: exit {self._popen.returncode}\n".encode()
                    )
                self._log.close()
                self._log = None
            with _LIVE_LOCK:
                _LIVE.discard(self)


@atexit.register
def _stop_leftovers() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        p.terminate()
    for p in procs:
        p.stop(timeout=10.0)


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.1,
    processes: Sequence[ManagedProcess] = (),
) -> T:
    """Poll ``probe`` until it returns something other than None.

    Args:
        what: Description for the timeout message.
        probe: Returns None (or raises ``OSError``) while not ready, any other value when ready.
        timeout: Seconds before giving up.
        interval: Seconds between polls.
        processes: Components that must stay alive meanwhile; checked on every poll.

    Returns:
        The first non-None value of ``probe``.

    Raises:
        ProcessExitedError: One of ``processes`` exited.
        StartupTimeoutError: ``timeout`` passed.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        for p in processes:
            p.check()
        try:
            result = probe()
        except OSError as e:  # connection refused, TLS not up yet, HTTP errors...
            last_error = e
            result = None
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise StartupTimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def process_start_ticks(pid: int) -> int | None:
    """Return a process's start time (clock ticks since boot), to tell a pid from a recycled one.

    Args:
        pid: Process id.

    Returns:
        The ``starttime`` field of ``/proc/<pid>/stat``, or None if there is no such process.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may contain spaces.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _parse_addr(hex_addr: str) -> str:
    if len(hex_addr) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(hex_addr)[::-1])
    raw = bytes.fromhex(hex_addr)
    # /proc/net/tcp6 prints four host-order 32-bit words.
    fixed = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, fixed)


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """List the TCP listening sockets (address, port) of a process (Linux ``/proc`` only).

    Args:
        pid: Process id.

    Returns:
        Local addresses of the sockets in LISTEN state that the process holds.
    """
    inodes = _socket_inodes(pid)
    found: list[tuple[str, int]] = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A" or fields[9] not in inodes:
                continue
            addr, port = fields[1].split(":")
            found.append((_parse_addr(addr), int(port, 16)))
    return found
