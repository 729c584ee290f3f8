"""The indexed store: indices stay consistent, replace reports the exact difference."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.store import Store


def obj(name: str, rv: str = "1", team: str | None = None, ns: str = "ns") -> dict[str, object]:
    labels = {"team": team} if team else {}
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels}}


def by_team(o: dict[str, object]) -> list[str]:
    team = o["metadata"]["labels"].get("team")  # type: ignore[index]
    return [team] if team else []


def test_upsert_delete_and_index() -> None:
    s = Store({"team": by_team})
    s.upsert(obj("a", team="x"))
    s.upsert(obj("b", team="x"))
    assert [o["metadata"]["name"] for o in s.by_index("team", "x")] == ["a", "b"]  # type: ignore[index]
    s.upsert(obj("a", rv="2", team="y"))
    assert [o["metadata"]["name"] for o in s.by_index("team", "x")] == ["b"]  # type: ignore[index]
    assert s.delete(obj("b")) is not None
    assert s.by_index("team", "x") == []
    assert s.delete(obj("missing")) is None


def test_replace_reports_difference() -> None:
    s = Store()
    s.replace([obj("a"), obj("b"), obj("c")])
    diff = s.replace([obj("a"), obj("b", rv="2"), obj("d")])
    assert [o["metadata"]["name"] for o in diff.deleted] == ["c"]  # type: ignore[index]
    assert [o["metadata"]["name"] for o in diff.added] == ["d"]  # type: ignore[index]
    assert [n["metadata"]["name"] for _, n in diff.updated] == ["b"]  # type: ignore[index]
    assert sorted(s.keys()) == ["ns/a", "ns/b", "ns/d"]


def test_indexer_added_late_covers_existing_items() -> None:
    s = Store()
    s.upsert(obj("a", team="x"))
    s.add_indexer("team", by_team)
    assert len(s.by_index("team", "x")) == 1


def test_sorted_values_come_in_key_order_whatever_the_insertion_order() -> None:
    s = Store()
    for ns, name in [("b", "x"), ("a", "z"), ("a", "y"), ("c", "a")]:
        s.upsert(obj(name, ns=ns))
    assert [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in s.sorted_values()] == [  # type: ignore[index]
        "a/y",
        "a/z",
        "b/x",
        "c/a",
    ]


names = st.sampled_from([f"o{i}" for i in range(8)])
snapshot = st.dictionaries(names, st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["x", "y", None])))


@settings(max_examples=150, deadline=None)
@given(st.lists(snapshot, min_size=1, max_size=6))
def test_replace_sequence_keeps_store_and_index_exact(snapshots: list[dict[str, tuple[str, str | None]]]) -> None:
    s = Store({"team": by_team})
    for snap in snapshots:
        before = set(s.keys())
        # As on a real server, any change of content comes with a new resourceVersion.
        diff = s.replace([obj(n, f"{rv}-{team}", team) for n, (rv, team) in snap.items()])
        after = {f"ns/{n}" for n in snap}
        assert set(s.keys()) == after
        assert {f"ns/{o['metadata']['name']}" for o in diff.deleted} == before - after  # type: ignore[index]
        assert {f"ns/{o['metadata']['name']}" for o in diff.added} == after - before  # type: ignore[index]
        for team in ("x", "y"):
            expected = sorted(n for n, (_, t) in snap.items() if t == team)
            assert [o["metadata"]["name"] for o in s.by_index("team", team)] == expected  # type: ignore[index]


def by_teams(o: dict[str, object]) -> list[str]:
    """Several values per object, some shared between versions."""
    team = o["metadata"]["labels"].get("team")  # type: ignore[index]
    return ["all", team, f"{team}-2"] if team else ["all"]


def by_team_lazily(o: dict[str, object]) -> Iterator[str]:
    """The values as a generator: two versions' values never compare equal, so every update refiles."""
    yield from by_teams(o)


INDEXERS = {"team": by_team, "teams": by_teams, "lazy": by_team_lazily}

step = st.tuples(st.sampled_from(["upsert", "delete"]), names, st.sampled_from(["x", "y", "z", None]))


@settings(max_examples=200, deadline=None)
@given(st.lists(step, min_size=1, max_size=30))
def test_upserts_and_deletes_keep_every_index_equal_to_a_rebuild(steps: list[tuple[str, str, str | None]]) -> None:
    s = Store(dict(INDEXERS))
    for n, (op, name, team) in enumerate(steps):
        if op == "upsert":
            s.upsert(obj(name, str(n), team))
        else:
            s.delete(obj(name))
    rebuilt = Store(dict(INDEXERS))
    for o in s.values():
        rebuilt.upsert(o)
    assert s._indices == rebuilt._indices  # same buckets, and no empty bucket left behind


def test_an_update_that_keeps_the_index_values_leaves_the_buckets_alone() -> None:
    s = Store(dict(INDEXERS))
    s.upsert(obj("a", "1", "x"))
    buckets = {name: {value: bucket for value, bucket in index.items()} for name, index in s._indices.items()}
    s.upsert(obj("a", "2", "x"))  # a status update: same labels, new resourceVersion
    for name in ("team", "teams"):  # values that compare equal (lists); a generator's never do
        for value, bucket in s._indices[name].items():
            assert bucket is buckets[name][value]  # no bucket emptied and made again
    assert [o["metadata"]["resourceVersion"] for o in s.by_index("teams", "x-2")] == ["2"]  # type: ignore[index]
