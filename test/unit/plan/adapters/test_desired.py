"""The desired adapter set: parsing, problems with their paths, label keys and values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.adapters.desired import Adapter, adapters_of, parse_adapters, source_digest
from kthena_py.vocab.labels import LORA_ADAPTERS


@pytest.mark.parametrize(
    ("raw", "names", "paths"),
    [
        (None, [], []),
        ("  ", [], []),
        ('[{"name": "fin", "source": "hf://org/fin"}]', ["fin"], []),
        ('[{"name": "fin", "url": "hf://org/fin"}]', ["fin"], []),
        ('[{"name": "fin", "url": "hf://a", "source": "hf://b"}]', [], ["[0].url"]),
        ('[{"name": "fin", "source": "hf://a"}, {"name": "fin", "source": "hf://b"}]', ["fin"], ["[1].name"]),
        ('[{"name": "-bad", "source": "hf://a"}, {"name": "ok", "source": "hf://b"}]', ["ok"], ["[0].name"]),
        ('[{"name": "a", "source": ""}]', [], ["[0].source"]),
        ('[{"name": "a", "source": "hf://x y"}]', [], ["[0].source"]),
        ('[{"name": "a", "source": "hf://x", "rank": 8}]', [], ["[0]"]),
        ('["fin"]', [], ["[0]"]),
        ('{"name": "fin"}', [], [""]),
        ("not json", [], [""]),
    ],
)
def test_parse_adapters(raw: str | None, names: list[str], paths: list[str]) -> None:
    adapters, problems = parse_adapters(raw)
    assert [a.name for a in adapters] == names
    assert [p.path for p in problems] == paths


def test_label_key_and_value_follow_the_name_and_source() -> None:
    adapter = Adapter("fin", "hf://org/fin")
    assert adapter.label == "adapter.kthena-py.io/fin"
    assert adapter.digest == source_digest("hf://org/fin") != source_digest("hf://org/fin2")
    assert len(adapter.digest) == 16


def test_adapters_of_reads_the_annotation_and_tolerates_its_absence() -> None:
    ms = {"metadata": {"annotations": {LORA_ADAPTERS: json.dumps([{"name": "a", "source": "s3://b/a"}])}}}
    assert adapters_of(ms) == (Adapter("a", "s3://b/a"),)
    assert adapters_of({"metadata": {}}) == ()


_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9_.]{0,20}[a-z0-9])?\Z")


@given(st.lists(st.tuples(_names, st.from_regex(r"\Ahf://[a-z]{1,10}/[a-z]{1,10}\Z")), max_size=6))
def test_every_valid_entry_is_kept_once_in_order(entries: list[tuple[str, str]]) -> None:
    text = json.dumps([{"name": n, "source": s} for n, s in entries])
    adapters, problems = parse_adapters(text)
    first: dict[str, str] = {}
    for name, source in entries:
        first.setdefault(name, source)
    assert [(a.name, a.source) for a in adapters] == list(first.items())
    assert len(problems) == len(entries) - len(first)
