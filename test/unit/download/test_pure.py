"""The other pure pieces: source parsing, settings, credential scope, sanitizing, marker, result, progress, removal."""

from __future__ import annotations

import json
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.download.config import parse_config, resolve_settings
from kthena_py.download.credentials import (
    HttpCredentials,
    Secret,
    auth_headers,
    origin,
    redact,
    sanitize_source,
    split_userinfo,
)
from kthena_py.download.marker import Marker, RequestKey, decode, encode, satisfies
from kthena_py.download.progress import Phase, Progress, rate_of, should_log, snapshot
from kthena_py.download.removal import refusal
from kthena_py.download.result import RESULT_LIMIT, DownloadError, FileEntry, Outcome, Reason, render_result
from kthena_py.download.sources.spec import Kind, parse_source


@pytest.mark.parametrize(
    ("source", "kind", "location", "prefix"),
    [
        ("hf://org/repo", Kind.HF, "org/repo", ""),
        ("org/repo", Kind.HF, "org/repo", ""),
        ("gpt2", Kind.HF, "gpt2", ""),
        ("s3://bucket/models/x", Kind.S3, "bucket", "models/x"),
        ("obs://bucket", Kind.S3, "bucket", ""),
        ("https://host/a/b.gguf", Kind.HTTP, "https://host/a/b.gguf", ""),
        ("pvc://claim/models/x", Kind.LOCAL, "/claim/models/x", ""),
        ("pvc://claim/../../etc", Kind.LOCAL, "/etc", ""),
        ("/data/models/x/", Kind.LOCAL, "/data/models/x", ""),
        ("ms://org/repo", Kind.MODELSCOPE, "org/repo", ""),
    ],
)
def test_parse_source(source: str, kind: Kind, location: str, prefix: str) -> None:
    spec = parse_source(source)
    assert (spec.kind, spec.location, spec.prefix) == (kind, location, prefix)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("ftp://host/x", Reason.UNSUPPORTED_SOURCE),
        ("oci://registry/image", Reason.UNSUPPORTED_SOURCE),
        ("relative/path/x", Reason.UNSUPPORTED_SOURCE),
        ("s3://", Reason.INVALID_ARGUMENTS),
        ("pvc://", Reason.INVALID_ARGUMENTS),
        ("", Reason.INVALID_ARGUMENTS),
    ],
)
def test_parse_source_errors(source: str, reason: Reason) -> None:
    with pytest.raises(DownloadError) as info:
        parse_source(source)
    assert info.value.reason is reason


@pytest.mark.parametrize(
    ("config", "env", "revision", "field", "expected"),
    [
        ({"hf_endpoint": "http://json"}, {"HF_ENDPOINT": "http://env"}, None, "hf_endpoint", "http://json"),
        ({}, {"HF_ENDPOINT": "http://env/"}, None, "hf_endpoint", "http://env"),
        ({}, {}, None, "hf_endpoint", "https://huggingface.co"),
        ({}, {"HF_AUTH_TOKEN": "tok-a", "HF_TOKEN": "tok-b"}, None, "hf_token", "tok-a"),
        ({}, {"HF_TOKEN": "tok-b"}, None, "hf_token", "tok-b"),
        ({"hf_token": "tok-j"}, {"HF_AUTH_TOKEN": "tok-a"}, None, "hf_token", "tok-j"),
        ({}, {"AWS_ACCESS_KEY_ID": "ak2", "ACCESS_KEY": "ak1"}, None, "access_key", "ak1"),
        ({}, {"AWS_SECRET_ACCESS_KEY": "sk2"}, None, "secret_key", "sk2"),
        ({}, {"AWS_ENDPOINT_URL": "http://s3"}, None, "endpoint", "http://s3"),
        ({"hf_revision": "v1"}, {"HF_REVISION": "v2"}, None, "hf_revision", "v1"),
        ({"hf_revision": "v1"}, {}, "v3", "hf_revision", "v3"),
        ({"hf_token": ""}, {"HF_AUTH_TOKEN": "tok-a"}, None, "hf_token", "tok-a"),
    ],
)
def test_settings_json_wins_env_fills(
    config: dict[str, str], env: dict[str, str], revision: str | None, field: str, expected: str
) -> None:
    value = getattr(resolve_settings(config, env, revision), field)
    assert (value.reveal() if isinstance(value, Secret) else value) == expected


def test_parse_config() -> None:
    assert parse_config('{"hf_token": "x", "endpoint": "", "n": 3}') == {"hf_token": "x", "n": "3"}
    for bad in ("[1]", "{nope", '{"a": {"b": 1}}'):
        with pytest.raises(DownloadError) as info:
            parse_config(bad)
        assert info.value.reason is Reason.INVALID_ARGUMENTS
        assert "nope" not in info.value.message


def test_secrets_do_not_print_themselves() -> None:
    settings = resolve_settings({"hf_token": "hf_topsecret", "secret_key": "sk_topsecret"}, {})
    assert "topsecret" not in repr(settings) and "topsecret" not in f"{settings}"
    assert sorted(settings.secret_values()) == ["hf_topsecret", "sk_topsecret"]


HUB = HttpCredentials(hf_endpoint="https://hub.example:443", hf_token=Secret("hf_tok"))


@pytest.mark.parametrize(
    ("url", "has_token"),
    [
        ("https://hub.example/org/repo/resolve/main/x", True),
        ("https://HUB.example:443/api/models/x", True),
        ("http://hub.example/x", False),  # another scheme is another origin
        ("https://hub.example:8443/x", False),
        ("https://cdn.example/x", False),
        ("https://hub.example.evil/x", False),
        ("ftp://hub.example/x", False),
    ],
)
def test_hf_token_only_to_the_hub_origin(url: str, has_token: bool) -> None:
    assert ("Authorization" in auth_headers(url, HUB)) is has_token


def test_userinfo_becomes_basic_auth_for_its_origin_only() -> None:
    clean, user, password = split_userinfo("https://me:p%40ss@files.example/m.gguf")
    assert clean == "https://files.example/m.gguf"
    assert user is not None and user.reveal() == "me" and password is not None and password.reveal() == "p@ss"
    creds = HttpCredentials(basic_origin=origin(clean), basic_user=user, basic_password=password)
    assert auth_headers(clean, creds)["Authorization"].startswith("Basic ")
    assert auth_headers("https://other.example/m.gguf", creds) == {}


@given(st.sampled_from(["http", "https"]), st.text(alphabet="abcdef0123", min_size=1, max_size=10))
def test_token_never_crosses_origins(scheme: str, host: str) -> None:
    url = f"{scheme}://{host}.other/x"
    assert auth_headers(url, HUB) == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("https://u:p@host/x?X-Amz-Signature=abc", "https://host/x?***"),
        ("https://host/x", "https://host/x"),
        ("https://host?token=1", "https://host?***"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("org/repo", "org/repo"),
    ],
)
def test_sanitize_source(source: str, expected: str) -> None:
    assert sanitize_source(source) == expected


def test_redact() -> None:
    assert redact("token hf_abcdef and hf_abcdef again", ["hf_abcdef", "x"]) == "token *** and *** again"


KEY = RequestKey.of("hf://org/repo", "main", ("b", "a"), None, {"a": "1" * 64})
MARKER = Marker(KEY, "c" * 40, (FileEntry("a", 3, "2" * 64),), "2026-01-01T00:00:00+00:00")


def test_marker_round_trip_and_match() -> None:
    decoded = decode(encode(MARKER))
    assert decoded == MARKER
    assert decoded is not None and satisfies(
        decoded, RequestKey.of("hf://org/repo", "main", ("a", "b"), None, {"a": "1" * 64})
    )


@pytest.mark.parametrize(
    "other",
    [
        RequestKey.of("hf://org/other", "main", ("a", "b"), None, {"a": "1" * 64}),
        RequestKey.of("hf://org/repo", "v2", ("a", "b"), None, {"a": "1" * 64}),
        RequestKey.of("hf://org/repo", "main", ("a",), None, {"a": "1" * 64}),
        RequestKey.of("hf://org/repo", "main", ("a", "b"), None, {"a": "3" * 64}),
        RequestKey.of("hf://org/repo", "main", ("a", "b"), "4" * 64, {"a": "1" * 64}),
    ],
)
def test_marker_does_not_satisfy_another_request(other: RequestKey) -> None:
    assert not satisfies(MARKER, other)


@pytest.mark.parametrize("text", ["", "{}", "[]", '{"version": 2}', encode(MARKER).replace('"size": 3', '"size": "x"')])
def test_damaged_marker_is_not_complete(text: str) -> None:
    assert decode(text) is None


@given(
    count=st.integers(0, 400),
    message=st.text(max_size=6000),
    reason=st.sampled_from(list(Reason)),
)
def test_result_always_fits_the_termination_message(count: int, message: str, reason: Reason) -> None:
    files = tuple(FileEntry(f"model-{i:05d}-of-00400.safetensors", i, f"{i:064x}") for i in range(count))
    outcome = Outcome(reason, message, "hf://org/repo", "/models/x", "c" * 40, files)
    text = render_result(outcome)
    assert len(text.encode()) <= RESULT_LIMIT
    doc = json.loads(text)
    assert doc["fileCount"] == count and doc["size"] == sum(range(count))
    assert len(doc["files"]) + doc.get("filesOmitted", 0) == count
    assert doc["reason"] == reason.value


def test_small_result_is_whole() -> None:
    outcome = Outcome(Reason.INTEGRITY_CHECK_FAILED, "a: mismatch", "s", "/o")
    doc = json.loads(render_result(outcome))
    assert doc == {
        "phase": "Failed",
        "reason": "IntegrityCheckFailed",
        "message": "a: mismatch",
        "source": "s",
        "path": "/o",
        "revision": None,
        "size": 0,
        "fileCount": 0,
        "cached": False,
        "files": [],
    }
    assert outcome.exit_code == 3


@pytest.mark.parametrize(
    ("samples", "rate"),
    [([], None), ([(0.0, 0)], None), ([(0.0, 0), (2.0, 100)], 50.0), ([(1.0, 0), (1.0, 10)], None)],
)
def test_rate(samples: list[tuple[float, int]], rate: float | None) -> None:
    assert rate_of(samples) == rate


def test_snapshot_eta() -> None:
    progress = Progress(Phase.DOWNLOADING, bytes_done=0, bytes_total=1000, files_total=2)
    progress.record(0.0)
    progress.bytes_done = 200
    progress.record(2.0)
    snap = snapshot(progress).to_json()
    assert snap["rateBytesPerSecond"] == 100.0 and snap["etaSeconds"] == 8.0 and snap["phase"] == "Downloading"
    progress.bytes_total = None
    assert snapshot(progress).eta is None


def test_samples_window_is_bounded() -> None:
    progress = Progress(samples=deque(maxlen=256))
    for t in range(100):
        progress.bytes_done = t * 10
        progress.record(float(t))
    assert progress.samples[-1][0] - progress.samples[0][0] <= 10.0


@pytest.mark.parametrize(("last", "now", "due"), [(None, 0.0, True), (0.0, 4.9, False), (0.0, 5.0, True)])
def test_should_log(last: float | None, now: float, due: bool) -> None:
    assert should_log(last, now, 5.0) is due


@pytest.mark.parametrize(
    ("path", "names", "force", "allowed"),
    [
        ("/", [".kthena-complete"], True, False),
        ("//", [], True, False),
        ("relative", [".lock"], False, False),
        ("/models/x", [".kthena-complete", "a"], False, True),
        ("/models/x", ["a.bin.partial"], False, True),
        ("/models/x", [".kthena-state.json"], False, True),
        ("/models/x", ["a.bin", "notes.txt"], False, False),
        ("/models/x", ["a.bin"], True, True),
        ("/models/x", [], False, False),
    ],
)
def test_removal_refusal(path: str, names: list[str], force: bool, allowed: bool) -> None:
    assert (refusal(path, names, force=force) is None) is allowed
