"""Source identity: its JSON, comparison, token, and the parsers of HEAD, hub revision and S3 answers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.sourceid import (
    MAX_ETAG,
    RemoteSource,
    SourceIdentity,
    from_http_headers,
    from_hub_revision,
    from_s3_head,
    from_s3_listing,
    identity_token,
    remote_source,
    same_content,
)

identities = st.builds(
    SourceIdentity,
    etag=st.none() | st.text(min_size=1, max_size=300),
    content_length=st.none() | st.integers(min_value=0, max_value=2**50),
    last_modified=st.none() | st.text(min_size=1, max_size=40),
)


@given(identities)
def test_json_reads_back_what_it_wrote(identity: SourceIdentity) -> None:
    again = SourceIdentity.from_json(identity.to_json())
    assert again == (None if identity.empty else identity)


@given(identities)
def test_an_etag_is_bounded(identity: SourceIdentity) -> None:
    assert identity.etag is None or len(identity.etag) <= MAX_ETAG


def test_a_long_etag_is_cut_with_a_hash_of_the_whole() -> None:
    a, b = SourceIdentity("x" * 1000 + "a"), SourceIdentity("x" * 1000 + "b")
    assert a.etag is not None and len(a.etag) == MAX_ETAG
    assert a.etag != b.etag


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"etag": '"e1"', "contentLength": 5, "lastModified": "Tue"}, SourceIdentity('"e1"', 5, "Tue")),
        ({"etag": '"e1"', "contentLength": -1}, SourceIdentity('"e1"')),
        ({"contentLength": True}, None),
        ({"content_length": 7}, SourceIdentity(content_length=7)),
        ({}, None),
        ("etag", None),
        (None, None),
        ({"etag": 5, "lastModified": ""}, None),
    ],
)
def test_from_json_is_tolerant(raw: Any, expected: SourceIdentity | None) -> None:
    assert SourceIdentity.from_json(raw) == expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (SourceIdentity("e1", 5), SourceIdentity("e1", 6), True),  # the ETag decides when both have one
        (SourceIdentity("e1", 5), SourceIdentity("e2", 5), False),
        (SourceIdentity(None, 5, "Tue"), SourceIdentity("e1", 5, "Tue"), True),
        (SourceIdentity(None, 5, "Tue"), SourceIdentity(None, 5, "Wed"), False),
        (SourceIdentity(None, 5), SourceIdentity(None, 6), False),
        (SourceIdentity(None, 5), SourceIdentity(None, None, "Tue"), None),  # nothing in common
        (SourceIdentity("e1"), SourceIdentity(None, 5), None),
    ],
)
def test_same_content(a: SourceIdentity, b: SourceIdentity, same: bool | None) -> None:
    assert same_content(a, b) is same
    assert same_content(b, a) is same


@given(identities)
def test_an_identity_is_the_same_content_as_itself_unless_empty(identity: SourceIdentity) -> None:
    assert same_content(identity, identity) is (None if identity.empty else True)


@given(identities, identities)
def test_the_token_is_deterministic_and_follows_the_etag(a: SourceIdentity, b: SourceIdentity) -> None:
    token = identity_token(a)
    assert token == identity_token(SourceIdentity(a.etag, a.content_length, a.last_modified))
    assert len(token) == 8 and all(c in "0123456789abcdef" for c in token)
    if a.etag is not None and a.etag == b.etag:
        assert identity_token(a) == identity_token(b)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("https://h/x.gguf", RemoteSource("http", "https://h/x.gguf", scheme="https")),
        ("HTTP://h/x", RemoteSource("http", "HTTP://h/x", scheme="http")),
        ("hf://org/repo", RemoteSource("hf", "org/repo", scheme="hf")),
        ("org/repo", RemoteSource("hf", "org/repo")),
        ("s3://bucket/models/llama", RemoteSource("s3", "bucket", "models/llama", "s3")),
        ("obs://bucket", RemoteSource("s3", "bucket", "", "obs")),
        ("ms://org/repo", RemoteSource("ms", "org/repo", scheme="ms")),
        ("pvc://models/llama", None),
        ("/mnt/models/llama", None),
        ("s3://", None),
        ("ftp://h/x", None),
        ("hf://not a repo", None),
    ],
)
def test_which_sources_are_remote(source: str, expected: RemoteSource | None) -> None:
    assert remote_source(source) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            {"ETag": '"abc"', "Content-Length": "42", "Last-Modified": "Tue, 01 Dec 2026 10:00:00 GMT"},
            SourceIdentity('"abc"', 42, "Tue, 01 Dec 2026 10:00:00 GMT"),
        ),
        ({"etag": 'W/"abc"', "content-length": "x"}, SourceIdentity('W/"abc"')),
        ({"Content-Length": " 7 "}, SourceIdentity(content_length=7)),
        ({"Content-Length": "-7"}, None),
        ({"Content-Type": "text/plain"}, None),
    ],
)
def test_head_headers(headers: dict[str, str], expected: SourceIdentity | None) -> None:
    assert from_http_headers(headers) == expected


COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                "sha": COMMIT,
                "siblings": [
                    {"rfilename": "config.json", "size": 10},
                    {"rfilename": "w.safetensors", "size": 130, "lfs": {"size": 5000, "sha256": "a" * 64}},
                ],
            },
            SourceIdentity(COMMIT, 5010),
        ),
        ({"sha": COMMIT, "siblings": [{"rfilename": "a"}]}, SourceIdentity(COMMIT)),  # no sizes (no blobs=true)
        ({"sha": COMMIT, "siblings": [{"rfilename": "a", "size": 1}, "junk"]}, SourceIdentity(COMMIT)),
        ({"sha": COMMIT, "siblings": [], "lfs": {}}, SourceIdentity(COMMIT, 0)),
        ({"siblings": [{"size": 1}]}, SourceIdentity(content_length=1)),
        ({"error": "Repository not found"}, None),
        ([COMMIT], None),
    ],
)
def test_hub_revision(data: Any, expected: SourceIdentity | None) -> None:
    assert from_hub_revision(data) == expected


def test_s3_head_spells_a_datetime_in_utc() -> None:
    moment = dt.datetime(2026, 12, 1, 11, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    head = {"ETag": '"e"', "ContentLength": 9, "LastModified": moment}
    assert from_s3_head(head) == SourceIdentity('"e"', 9, "2026-12-01T10:00:00Z")
    assert from_s3_head({"LastModified": "2026-12-01T10:00:00Z"}) == SourceIdentity(
        last_modified="2026-12-01T10:00:00Z"
    )
    assert from_s3_head({}) is None


objects = st.lists(
    st.fixed_dictionaries(
        {
            "Key": st.text(alphabet="abc/", min_size=1, max_size=6),
            "ETag": st.text(alphabet="0123456789abcdef", min_size=1, max_size=6),
            "Size": st.integers(min_value=0, max_value=10**6),
        }
    ),
    max_size=8,
    unique_by=lambda o: o["Key"],
)


@given(objects, st.randoms())
def test_an_s3_listing_identity_ignores_order_and_directory_keys(listing: list[dict[str, Any]], rnd: Any) -> None:
    shuffled = list(listing)
    rnd.shuffle(shuffled)
    identity = from_s3_listing(listing)
    assert identity == from_s3_listing(shuffled)
    files = [o for o in listing if not o["Key"].endswith("/")]
    if not files:
        assert identity is None
        return
    assert identity is not None and identity.etag is not None and identity.etag.startswith("sha256:")
    assert identity.content_length == sum(o["Size"] for o in files)


@pytest.mark.parametrize(
    "change",
    [
        lambda o: {**o, "ETag": o["ETag"] + "0"},
        lambda o: {**o, "Size": o["Size"] + 1},
        lambda o: {**o, "Key": o["Key"] + "x"},
    ],
)
def test_an_s3_listing_identity_changes_with_any_object(change: Any) -> None:
    listing = [{"Key": "m/a", "ETag": '"1"', "Size": 3}, {"Key": "m/b", "ETag": '"2"', "Size": 4}]
    before = from_s3_listing(listing)
    after = from_s3_listing([listing[0], change(listing[1])])
    assert before is not None and after is not None and before.etag != after.etag
    assert from_s3_listing([*listing, {"Key": "m/c", "ETag": '"3"', "Size": 0}]) != before
    assert from_s3_listing(listing[:1]) != before
