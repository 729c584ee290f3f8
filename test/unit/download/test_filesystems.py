"""Where direct I/O is used: the mount table read, the deepest mount found, the policy per filesystem."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.filesystems import (
    LOCAL_BLOCK_FILESYSTEMS,
    direct_io_allowed,
    filesystem_of,
    output_filesystem,
    parse_mountinfo,
)

MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
25 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:40 / /models rw,relatime shared:9 - nfs4 server:/export rw,vers=4.2
31 30 253:2 / /models/local rw,relatime - xfs /dev/vdb rw
32 22 0:41 / /mnt/with\\040space rw - tmpfs tmpfs rw
33 22 0:42 / /data rw - ext4 /dev/vdc rw
34 22 0:43 / /data rw - fuse.juicefs JuiceFS:vol rw
garbage line without separator
35 22 0:44 / - broken
"""


def test_parse_mountinfo_reads_points_and_types_and_skips_garbage() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert ("/", "ext4") in mounts and ("/models", "nfs4") in mounts and ("/models/local", "xfs") in mounts
    assert ("/mnt/with space", "tmpfs") in mounts
    assert len(mounts) == 7


@pytest.mark.parametrize(
    ("path", "fstype"),
    [
        ("/", "ext4"),
        ("/var/lib/x", "ext4"),
        ("/models", "nfs4"),
        ("/models/qwen/model.safetensors", "nfs4"),
        ("/models/local/qwen", "xfs"),
        ("/models-other/x", "ext4"),  # a sibling whose name starts like a mount point is not under it
        ("/mnt/with space/m", "tmpfs"),
        ("/data/m", "fuse.juicefs"),  # two mounts on one point: the one on top (later) wins
    ],
)
def test_filesystem_of_is_the_deepest_mount(path: str, fstype: str) -> None:
    assert filesystem_of(path, parse_mountinfo(MOUNTINFO)) == fstype


def test_filesystem_of_a_relative_path_or_empty_table_is_unknown() -> None:
    assert filesystem_of("relative/x", parse_mountinfo(MOUNTINFO)) is None
    assert filesystem_of("/x", []) is None


@pytest.mark.parametrize(
    ("mode", "fstype", "allowed"),
    [
        ("auto", "ext4", True),
        ("auto", "xfs", True),
        ("auto", "nfs4", False),
        ("auto", "ceph", False),
        ("auto", "fuse.juicefs", False),
        ("auto", "overlay", False),
        ("auto", "tmpfs", False),
        ("auto", None, False),
        ("on", "nfs4", True),
        ("on", None, True),
        ("off", "ext4", False),
    ],
)
def test_the_policy(mode: str, fstype: str | None, allowed: bool) -> None:
    assert direct_io_allowed(mode, fstype) is allowed  # type: ignore[arg-type]


@given(st.text())
def test_any_text_parses_without_raising(text: str) -> None:
    for point, fstype in parse_mountinfo(text):
        assert isinstance(point, str) and isinstance(fstype, str)


@given(st.sampled_from(sorted(LOCAL_BLOCK_FILESYSTEMS)), st.sampled_from(["nfs", "nfs4", "cifs", "ceph", "lustre"]))
def test_auto_never_goes_direct_on_a_network_mount_under_a_local_root(local: str, network: str) -> None:
    mounts = [("/", local), ("/cache", network)]
    assert direct_io_allowed("auto", filesystem_of("/cache/model/x", mounts)) is False
    assert direct_io_allowed("auto", filesystem_of("/other/x", mounts)) is True


def test_output_filesystem_names_this_machines_filesystem(tmp_path: Path) -> None:
    fstype = output_filesystem(str(tmp_path))
    if Path("/proc/self/mountinfo").exists():
        assert fstype is not None and fstype == filesystem_of(
            str(tmp_path.resolve()), parse_mountinfo(Path("/proc/self/mountinfo").read_text())
        )
    else:
        assert fstype is None
