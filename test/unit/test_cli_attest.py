"""``kthena-py attest`` keygen -> sign -> verify on real files, and the manager's loading of its trusted keys."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest
import structlog

from kthena_py.cli.common import CommandError
from kthena_py.cli.manager import _attestation_settings
from kthena_py.main import main


def _model(root: Path) -> Path:
    model = root / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    (model / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 100)
    (model / ".kthena-complete").write_text("marker")  # hidden: not a model file
    return model


@pytest.mark.parametrize("algorithm", ["ed25519", "p256", "p384"])
def test_keygen_sign_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str], algorithm: str) -> None:
    model = _model(tmp_path)
    keys = tmp_path / "keys"
    assert main(["attest", "keygen", "--out-dir", str(keys), "--keyid", "release", "--algorithm", algorithm]) == 0
    assert stat.S_IMODE((keys / "release.key").stat().st_mode) == 0o600
    capsys.readouterr()
    assert main(["attest", "sign", "--key", str(keys / "release.key"), "--keyid", "release", "--dir", str(model)]) == 0
    envelope = capsys.readouterr().out
    (tmp_path / "envelope.json").write_text(envelope)
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "release.pem").write_text((keys / "release.pem").read_text())  # only the public key is trusted
    args = ["attest", "verify", "--keys", str(trusted), "--envelope", str(tmp_path / "envelope.json"), "--dir"]
    assert main([*args, str(model)]) == 0
    assert capsys.readouterr().out.startswith("Verified: signed by key release: 2 staged file(s)")
    (model / "sub" / "weights.bin").write_bytes(b"changed")
    assert main([*args, str(model)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("DigestMismatch: file sub/weights.bin")


def test_sign_lists_files_by_base_name_and_defaults_the_key_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64

    model = _model(tmp_path)
    assert main(["attest", "keygen", "--out-dir", str(tmp_path / "k")]) == 0
    keyid = capsys.readouterr().out.split()[2].rstrip(":")
    assert keyid.startswith("sha256-") and (tmp_path / "k" / f"{keyid}.pem").exists()
    key = str(tmp_path / "k" / f"{keyid}.key")
    assert main(["attest", "sign", "--key", key, "--file", str(model / "sub" / "weights.bin")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["signatures"][0]["keyid"] == keyid
    statement = json.loads(base64.b64decode(document["payload"]))
    assert [s["name"] for s in statement["subject"]] == ["weights.bin"]


def test_keygen_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attest", "keygen", "--out-dir", str(tmp_path), "--keyid", "k"]) == 0
    before = (tmp_path / "k.key").read_bytes()
    assert main(["attest", "keygen", "--out-dir", str(tmp_path), "--keyid", "k"]) == 1
    assert "not overwritten" in capsys.readouterr().err and (tmp_path / "k.key").read_bytes() == before
    assert main(["attest", "keygen", "--out-dir", str(tmp_path), "--keyid", "a/b"]) == 1


def _manager_args(mode: str, keys: str | None) -> argparse.Namespace:
    return argparse.Namespace(model_attestation=mode, model_attestation_keys=keys)


def test_the_manager_loads_its_keys_at_start_and_refuses_bad_ones(tmp_path: Path) -> None:
    log = structlog.get_logger("test")
    assert main(["attest", "keygen", "--out-dir", str(tmp_path / "keys"), "--keyid", "release"]) == 0
    (tmp_path / "keys" / "release.key").unlink()  # a key directory holds public keys only
    settings = _attestation_settings(_manager_args("enforce", str(tmp_path / "keys")), log)
    assert settings["attestation_mode"] == "enforce"
    assert [k.keyid for k in settings["attestation_keys"]] == ["release"]
    assert _attestation_settings(_manager_args("off", None), log) == {"attestation_mode": "off"}
    with pytest.raises(CommandError, match="enforce needs --model-attestation-keys"):
        _attestation_settings(_manager_args("enforce", None), log)
    (tmp_path / "keys" / "broken.pem").write_text("garbage")
    with pytest.raises(CommandError, match=r"broken\.pem: not a PEM public key"):
        _attestation_settings(_manager_args("warn", str(tmp_path / "keys")), log)
    with pytest.raises(CommandError, match="cannot read the trusted keys"):
        _attestation_settings(_manager_args("warn", str(tmp_path / "missing")), log)
