"""Which configuration ``KubeClient.from_environment`` picks: client-go's order, nothing contacted.

``--kubeconfig`` > ``$KUBECONFIG`` (a list is merged, first file wins) > the in-cluster service account >
``~/.kube/config``; an unusable choice or no configuration at all is a :class:`ConfigError` that says what to do.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.config import incluster_config

from kthena_py.kube import ConfigError, KubeClient
from kthena_py.runtime.certs import new_ca


def _kubeconfig(path: Path, server: str, *, context: str = "only") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": context, "user": {"token": "t"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
                "current-context": context,
            }
        )
    )
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment: HOME in tmp_path, no KUBECONFIG, not in a cluster, no service account files."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "sa" / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "sa" / "ca.crt"))
    return tmp_path


def _service_account(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (env / "sa").mkdir()
    (env / "sa" / "token").write_text("token")
    (env / "sa" / "ca.crt").write_bytes(new_ca("test", now=datetime.datetime.now(datetime.UTC)).cert)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


async def _host(path: str | None = None) -> tuple[str, str]:
    client = await KubeClient.from_environment(path)
    try:
        return client.host, client.config_source
    finally:
        await client.close()


async def test_flag_beats_everything(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = _kubeconfig(env / "flag", "https://127.0.0.1:1001")
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(env / "envfile", "https://127.0.0.1:1002")))
    _kubeconfig(env / "home" / ".kube" / "config", "https://127.0.0.1:1003")
    _service_account(env, monkeypatch)
    assert await _host(str(flag)) == ("https://127.0.0.1:1001", f"--kubeconfig {flag}")


async def test_kubeconfig_env_beats_in_cluster_and_home(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _kubeconfig(env / "a", "https://127.0.0.1:1002", context="a")
    second = _kubeconfig(env / "b", "https://127.0.0.1:1009", context="b")
    value = os.pathsep.join([str(first), str(env / "missing"), str(second)])
    monkeypatch.setenv("KUBECONFIG", value)
    _kubeconfig(env / "home" / ".kube" / "config", "https://127.0.0.1:1003")
    _service_account(env, monkeypatch)
    assert await _host() == ("https://127.0.0.1:1002", f"$KUBECONFIG={value}")


async def test_in_cluster_beats_home(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kubeconfig(env / "home" / ".kube" / "config", "https://127.0.0.1:1003")
    _service_account(env, monkeypatch)
    assert await _host() == ("https://10.0.0.1:443", "in-cluster service account")


async def test_home_config_last_and_incomplete_in_cluster_falls_through(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _kubeconfig(env / "home" / ".kube" / "config", "https://127.0.0.1:1003")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # but no token mounted
    assert await _host() == ("https://127.0.0.1:1003", str(home))


async def test_nothing_found_says_what_to_do(env: Path) -> None:
    with pytest.raises(ConfigError, match=r"pass --kubeconfig, set \$KUBECONFIG, run in a cluster"):
        await _host()


async def test_unusable_explicit_file_is_an_error_not_a_fallback(env: Path) -> None:
    _kubeconfig(env / "home" / ".kube" / "config", "https://127.0.0.1:1003")
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        await _host(str(env / "does-not-exist"))
