"""The hub's model-info answer read without the hub client: the same request, URLs and listing as huggingface_hub."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from huggingface_hub import hf_hub_url
from huggingface_hub.hf_api import ModelInfo
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.plan import RemoteFile
from kthena_py.download.sources.hf import listing_from_model_info
from kthena_py.download.sources.hubapi import info_url, listing_of, resolve_url

ENDPOINT = "http://127.0.0.1:8080"
SHA = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "A" * 64

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20)
revisions = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
hexes = st.text("0123456789abcdefABCDEF", min_size=1, max_size=64)
sizes = st.integers(min_value=0, max_value=2**40)
lfs_objects = st.fixed_dictionaries({"size": sizes, "sha256": hexes, "pointerSize": st.integers(0, 200)})
siblings = st.fixed_dictionaries(
    {"rfilename": names},
    optional={"size": sizes, "blobId": st.one_of(st.none(), hexes), "lfs": st.one_of(st.none(), lfs_objects)},
)
answers = st.fixed_dictionaries(
    {"id": st.just("org/model"), "siblings": st.lists(siblings, max_size=5)},
    optional={"sha": st.one_of(st.none(), hexes)},
)


@pytest.mark.parametrize(
    ("revision", "url"),
    [
        (None, f"{ENDPOINT}/api/models/org/model?blobs=true"),
        ("main", f"{ENDPOINT}/api/models/org/model/revision/main?blobs=true"),
        ("refs/pr/1", f"{ENDPOINT}/api/models/org/model/revision/refs%2Fpr%2F1?blobs=true"),
        ("v 1", f"{ENDPOINT}/api/models/org/model/revision/v%201?blobs=true"),
    ],
)
def test_info_url_is_the_hub_clients_request(revision: str | None, url: str) -> None:
    assert info_url(ENDPOINT, "org/model", revision) == url
    assert parse_qs(urlsplit(url).query) == {"blobs": ["true"]}


@given(repo=st.sampled_from(["gpt2", "org/model", "Org-1/m.v2"]), revision=revisions, filename=names)
def test_resolve_url_equals_hf_hub_url(repo: str, revision: str, filename: str) -> None:
    expected = hf_hub_url(repo, filename, revision=revision, endpoint=ENDPOINT)
    assert resolve_url(ENDPOINT, repo, revision, filename) == expected


def test_an_lfs_file_and_a_small_file() -> None:
    data = {
        "sha": SHA,
        "siblings": [
            {"rfilename": "config.json", "size": 24, "blobId": "b1"},
            {
                "rfilename": "model.safetensors",
                "size": 134,
                "blobId": "b2",
                "lfs": {"size": 600000, "sha256": DIGEST, "pointerSize": 134},
            },
        ],
    }
    listing = listing_of(data, "org/model", ENDPOINT, "main")
    assert listing is not None and listing.revision == SHA
    assert listing.files == (
        RemoteFile("config.json", 24, None, f"{SHA}:b1", f"{ENDPOINT}/org/model/resolve/{SHA}/config.json"),
        RemoteFile(
            "model.safetensors", 600000, "a" * 64, f"{SHA}:b2", f"{ENDPOINT}/org/model/resolve/{SHA}/model.safetensors"
        ),
    )


@pytest.mark.parametrize(
    "data",
    [
        [],
        "not an object",
        {"sha": SHA},
        {"sha": SHA, "siblings": {"rfilename": "x"}},
        {"sha": 7, "siblings": []},
        {"sha": SHA, "siblings": ["x"]},
        {"sha": SHA, "siblings": [{"size": 3}]},
        {"sha": SHA, "siblings": [{"rfilename": ""}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "size": "3"}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "size": -1}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "size": True}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "blobId": 5}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "lfs": "yes"}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "lfs": {"sha256": DIGEST}}]},
        {"sha": SHA, "siblings": [{"rfilename": "x", "lfs": {"size": 3}}]},
        {"sha": SHA, "siblings": [{"rfilename": "ok"}, {"rfilename": "x", "lfs": {"size": 3, "sha256": 1}}]},
    ],
)
def test_an_answer_it_does_not_recognise_is_left_to_the_hub_client(data: Any) -> None:
    assert listing_of(data, "org/model", ENDPOINT, None) is None


@given(data=answers, revision=st.one_of(st.none(), st.just("v1")))
def test_the_listing_equals_the_hub_clients_reading(data: dict[str, Any], revision: str | None) -> None:
    ours = listing_of(data, "org/model", ENDPOINT, revision)
    theirs = listing_from_model_info(ModelInfo(**dict(data)), "org/model", ENDPOINT, revision)
    assert ours == theirs
