"""bench/native_profile.py: perf's report, split by library (pure parsing; the benchmark itself is never asserted)."""

from __future__ import annotations

import pytest

from . import load

native_profile = load("native_profile")
group_of, shares = native_profile.group_of, native_profile.shares

REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 3K of event 'cpu-clock:pppH'
#
# Overhead  Shared Object
# ........  ..............................................
#
    73.91%  libpython3.11.so.1.0
     8.88%  [kernel.kallsyms]
     3.97%  libc.so.6
     3.58%  _pydantic_core.cpython-311-x86_64-linux-gnu.so
     3.52%  loop.cpython-311-x86_64-linux-gnu.so
     2.16%  libcrypto.so.3
     0.90%  _http_parser.cpython-311-x86_64-linux-gnu.so
     0.58%  libssl.so.3
     0.13%  [vdso]
     0.10%  _random.cpython-311-x86_64-linux-gnu.so
"""


@pytest.mark.parametrize(
    ("dso", "group"),
    [
        ("libpython3.11.so.1.0", "interpreter"),
        ("[kernel.kallsyms]", "kernel"),
        ("[vdso]", "kernel"),
        ("libcrypto.so.3", "TLS"),
        ("_ssl.cpython-311-x86_64-linux-gnu.so", "TLS"),
        ("_pydantic_core.cpython-311-x86_64-linux-gnu.so", "JSON"),
        ("loop.cpython-311-x86_64-linux-gnu.so", "event loop"),
        ("_asyncio.cpython-311-x86_64-linux-gnu.so", "event loop"),
        ("_multidict.cpython-311-x86_64-linux-gnu.so", "HTTP parsing"),
        ("libc.so.6", "C library"),
        ("_random.cpython-311-x86_64-linux-gnu.so", "other"),
    ],
)
def test_each_library_falls_in_its_group(dso: str, group: str) -> None:
    assert group_of(dso) == group


def test_a_report_is_summed_by_group_and_its_comments_skipped() -> None:
    got = shares(REPORT.splitlines())
    assert got["interpreter"] == pytest.approx(73.91)
    assert got["kernel"] == pytest.approx(9.01)
    assert got["TLS"] == pytest.approx(2.74)
    assert got["other"] == pytest.approx(0.10)
    assert sum(got.values()) == pytest.approx(97.73)
