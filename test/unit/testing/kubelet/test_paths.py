"""The mount table: which host path a container path stands for, and the rewrite of argv and env values."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from kthena_py.testing.kubelet import Mount, MountTable, host_path_for
from kthena_py.testing.kubelet.volumes import VolumeError, container_mounts, volume_dirs

TABLE = MountTable(
    [
        Mount("/data", Path("/h/data")),
        Mount("/data/models/", Path("/h/models")),
        Mount("/dev/termination-log", Path("/h/term")),
    ]
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/data", "/h/data"),
        ("/data/x.bin", "/h/data/x.bin"),
        ("/data/models", "/h/models"),  # longest mount path wins
        ("/data/models/a/b", "/h/models/a/b"),
        ("/datalake/x", "/datalake/x"),  # a prefix only on a path boundary
        ("/dev/termination-log", "/h/term"),
        ("--output-dir=/data/models/m", "--output-dir=/h/models/m"),
        ("MODEL=/data/m", "MODEL=/h/data/m"),
        ("relative/data", "relative/data"),
        ("http://host/data", "http://host/data"),
        ("a/b=/data/x", "a/b=/data/x"),  # not an option: the key holds a slash
        ("python3 /data/x", "python3 /data/x"),  # inside a command line: not rewritten
        ("", ""),
    ],
)
def test_map_value(value: str, expected: str) -> None:
    assert TABLE.map_value(value) == expected


def test_a_later_mount_at_the_same_path_wins() -> None:
    table = MountTable([Mount("/m", Path("/one")), Mount("/m/", Path("/two"))])
    assert table.map_value("/m/f") == "/two/f"


@given(
    hs.lists(hs.from_regex(r"(/[a-z]{1,3}){1,3}", fullmatch=True), min_size=1, max_size=5, unique=True),
    hs.from_regex(r"(/[a-z]{1,3}){0,3}", fullmatch=True),
)
def test_the_longest_enclosing_mount_maps_a_path(paths: list[str], suffix: str) -> None:
    table = MountTable([Mount(p, Path("/host") / str(i)) for i, p in enumerate(paths)])
    for i, p in enumerate(paths):
        value = p + suffix
        enclosing = [q for q in paths if value == q or value.startswith(q + "/")]
        best = max(enclosing, key=len)
        rest = value[len(best) :].lstrip("/")
        expected = Path("/host") / str(paths.index(best))
        assert table.map_value(value) == str(expected / rest if rest else expected), (i, value)


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/srv/x", "/r/srv/x"), ("/", "/r"), ("/../../etc", "/r/etc"), ("srv//a/./b", "/r/srv/a/b")],
)
def test_host_path_for_stays_under_the_root(path: str, expected: str) -> None:
    assert host_path_for(Path("/r"), path) == Path(expected)


@given(hs.text(alphabet="/.ab", max_size=20))
def test_host_path_for_never_leaves_the_root(path: str) -> None:
    result = host_path_for(Path("/r"), path)
    assert result == Path("/r") or Path("/r") in result.parents
    assert ".." not in posixpath.normpath(str(result)).split("/")


POD = {
    "spec": {
        "volumes": [
            {"name": "host", "hostPath": {"path": "/srv/cache"}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "models"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "conf", "configMap": {"name": "settings"}},
        ]
    }
}


def test_volume_dirs_by_kind() -> None:
    dirs = volume_dirs(
        POD, host_root=Path("/n"), volume_root=Path("/v"), pod_dir=Path("/p"), claims={"models": "/exports/m"}
    )
    assert dirs == {
        "host": Path("/n/srv/cache"),
        "claim": Path("/v/exports/m"),
        "scratch": Path("/p/volumes/scratch"),
        "conf": Path("/p/volumes/conf"),
    }


@pytest.mark.parametrize(
    ("volume", "claims", "message"),
    [
        ({"name": "c", "persistentVolumeClaim": {"claimName": "x"}}, {}, 'persistentvolumeclaim "x" is not bound'),
        ({"name": "n", "nfs": {"server": "s", "path": "/"}}, {}, "kind ['nfs'] is not supported"),
    ],
)
def test_volume_dirs_refuses(volume: dict[str, object], claims: dict[str, str], message: str) -> None:
    with pytest.raises(VolumeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        volume_dirs(
            {"spec": {"volumes": [volume]}}, host_root=Path("/n"), volume_root=Path("/v"), pod_dir=Path("/p"),
            claims=claims,
        )  # fmt: skip


def test_container_mounts_honour_sub_path_read_only_and_the_termination_path() -> None:
    container = {
        "name": "main",
        "terminationMessagePath": "/tmp/msg",
        "volumeMounts": [
            {"name": "claim", "mountPath": "/models", "subPath": "llm/v1", "readOnly": True},
            {"name": "scratch", "mountPath": "/work", "subPath": "../../escape"},
        ],
    }
    volumes = {"claim": Path("/v/m"), "scratch": Path("/p/s")}
    assert container_mounts(container, volumes, termination_file=Path("/p/t/main")) == [
        Mount("/models", Path("/v/m/llm/v1"), True),
        Mount("/work", Path("/p/s/escape"), False),
        Mount("/tmp/msg", Path("/p/t/main"), False),
    ]
    default = container_mounts({"name": "c"}, {}, termination_file=Path("/t"))
    assert default == [Mount("/dev/termination-log", Path("/t"))]
    with pytest.raises(VolumeError, match='unknown volume "nope"'):
        container_mounts(
            {"name": "c", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, {}, termination_file=Path("/t")
        )
