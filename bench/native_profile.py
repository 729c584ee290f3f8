"""Where a Python manager's CPU goes below the Python frames: ``perf record`` attached for a window, split by library.

Used by ``bench/converge.py --native DIR``. py-spy (``--profile``) names the Python function on CPU, but a sample
with no Python frame of kthena_py's (the event loop's own, a quarter of them at 500 ModelServings) does not say
whether the time went to the interpreter, the kernel's network stack, TLS or JSON. ``perf`` samples the process's
threads whatever they run (here at ``rate`` per second, without call graphs, so nothing pauses the manager) and
:func:`report` groups the samples by the shared object they fell in:

* **interpreter**: ``libpython`` (bytecode, dicts, allocation, reference counts, the cyclic collector);
* **kernel**: system calls, the loopback network stack, page faults, scheduling;
* **TLS**: ``libcrypto`` and ``libssl`` (and the ``_ssl`` module);
* **JSON**: ``pydantic_core`` (watch events and answers decoded, bodies encoded);
* **event loop**: uvloop's and asyncio's C modules;
* **HTTP parsing**: aiohttp's, multidict's and yarl's C modules;
* **C library**: ``libc`` (``malloc``, ``memmove``), and the rest.

Nothing here is asserted. Without ``perf`` the window is skipped and that is printed; when the kernel refuses it,
perf writes nothing and that is printed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from cpu_profile import Recording

__all__ = ["attach", "group_of", "report", "shares"]

# (substring of a shared object's name, group), first match wins
_GROUPS: tuple[tuple[str, str], ...] = (
    ("libpython", "interpreter"),
    ("kernel", "kernel"),
    ("[vdso]", "kernel"),
    ("libcrypto", "TLS"),
    ("libssl", "TLS"),
    ("_ssl.", "TLS"),
    ("pydantic_core", "JSON"),
    ("uvloop", "event loop"),
    ("loop.cpython", "event loop"),
    ("_asyncio.", "event loop"),
    ("_http_parser", "HTTP parsing"),
    ("_http_writer", "HTTP parsing"),
    ("_multidict", "HTTP parsing"),
    ("_quoting", "HTTP parsing"),
    ("_helpers_c", "HTTP parsing"),
    ("libc.so", "C library"),
    ("libm.so", "C library"),
)

_LINE = re.compile(r"^\s*([0-9.]+)%\s+(\S.*?)\s*$")


def attach(pid: int, out: Path, rate: int = 199) -> Recording | None:
    """``perf record`` attached to ``pid``; ``None`` when perf is absent."""
    exe = shutil.which("perf")
    if exe is None:
        return None
    return Recording.start([exe, "record", "--quiet", "-F", str(rate), "-p", str(pid), "-o", str(out)], out)


def group_of(dso: str) -> str:
    """The group (module docstring) of a shared object's name as perf prints it."""
    for needle, group in _GROUPS:
        if needle in dso:
            return group
    return "other"


def shares(lines: Iterable[str]) -> Counter[str]:
    """Per cent of the samples by group, from ``perf report --stdio --sort dso`` lines (comments skipped)."""
    groups: Counter[str] = Counter()
    for line in lines:
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            groups[group_of(m.group(2))] += float(m.group(1))
    return groups


def report(data: Path) -> str:
    """One line: the samples' shares by group, or why there are none."""
    exe = shutil.which("perf")
    if exe is None:
        return "perf is not installed"
    done = subprocess.run(
        [exe, "report", "--stdio", "--sort", "dso", "-i", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    groups = shares(done.stdout.splitlines())
    if not groups:
        return f"no samples ({done.stderr.strip()[:200] or 'perf report printed none'})"
    return ", ".join(f"{name} {pct:.0f} %" for name, pct in groups.most_common() if pct >= 0.5)
