"""The client loads only its share of kubernetes-asyncio, and the rest of the package still imports normally.

Each case runs in a fresh interpreter: which modules are loaded is a property of the whole process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0k3n}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_client_from_a_kubeconfig_loads_a_few_kubernetes_asyncio_modules(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    out = run(
        f"""
        import asyncio, sys
        from kthena_py.kube import KubeClient

        async def main():
            client = await KubeClient.from_kubeconfig({str(path)!r})
            print(client.host)
            await client.close()

        asyncio.run(main())
        print(len([m for m in sys.modules if m.split(".")[0] == "kubernetes_asyncio"]))
        """
    )
    host, count = out.splitlines()
    assert host == "https://127.0.0.1:6443"
    assert int(count) < 40  # a normal import of kubernetes_asyncio loads about 850


def test_the_rest_of_the_package_still_imports_as_usual_afterwards() -> None:
    out = run(
        """
        from kthena_py.kube import sdk
        light = sdk.load()
        from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api, V1Pod
        import kubernetes_asyncio
        import kubernetes_asyncio.client.models as models
        assert ApiClient is light.ApiClient and Configuration is light.Configuration
        assert models.V1Pod is V1Pod and kubernetes_asyncio.client.CoreV1Api is CoreV1Api
        print(kubernetes_asyncio.__version__, kubernetes_asyncio.watch.Watch.__name__)
        """
    )
    version, watch = out.split()
    assert version[0].isdigit() and watch == "Watch"


def test_an_already_imported_package_is_used_as_it_is() -> None:
    out = run(
        """
        import kubernetes_asyncio
        from kubernetes_asyncio.client import ApiClient
        from kthena_py.kube import sdk
        print(sdk.load().ApiClient is ApiClient, type(kubernetes_asyncio).__name__)
        """
    )
    assert out == "True module"
