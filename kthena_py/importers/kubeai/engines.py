"""How KubeAI starts each engine, as a kthena_py entry container: image, command line, environment, probe.

Guarantees: :func:`engine_container` is pure; every engine listens on :data:`PORT` (KubeAI's model port) and
gets a readiness probe on its health path, so the activator and Services only see a pod once it answers. The
user's ``args`` come after the engine's own, and the user's ``env`` wins over the engine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.plan.modelbooster.types import DEFAULT_RUNTIME_IMAGE

__all__ = ["ENGINES", "PORT", "RUNTIME_PORT", "EngineLaunch", "engine_container", "runtime_sidecar"]

PORT = 8000
RUNTIME_PORT = 8100
"""Kthena's runtime sidecar port (its ``RUNTIME_PORT`` default), the LoRA endpoint of an imported model."""
ENGINES: tuple[str, ...] = ("VLLM", "OLlama", "FasterWhisper", "Infinity")


@dataclass(frozen=True)
class EngineLaunch:
    """What the container runs: the model as the engine names it, and the model's served name."""

    engine: str
    model: str
    served_name: str
    image: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    lora: bool = False


def _command(launch: EngineLaunch) -> tuple[list[str] | None, list[str], dict[str, str], str]:
    """``(command, args, env, health path)`` of the engine."""
    if launch.engine == "VLLM":
        args = [f"--model={launch.model}", f"--served-model-name={launch.served_name}", f"--port={PORT}"]
        env = {}
        if launch.lora:
            args.append("--enable-lora")
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        return None, [*args, *launch.args], env, "/health"
    if launch.engine == "OLlama":
        serve = " ".join(["ollama", "serve", *launch.args])
        script = (
            f"{serve} & until ollama list >/dev/null 2>&1; do sleep 1; done; "
            f"ollama pull {launch.model} && ollama cp {launch.model} {launch.served_name} && wait"
        )
        env = {"OLLAMA_HOST": f"0.0.0.0:{PORT}", "OLLAMA_KEEP_ALIVE": "999999h"}
        return ["/bin/sh", "-c", script], [], env, "/"
    if launch.engine == "FasterWhisper":
        env = {"WHISPER__MODEL": launch.model, "ENABLE_UI": "false"}
        return None, list(launch.args), env, "/health"
    args = [
        "v2",
        f"--model-id={launch.model}",
        f"--served-model-name={launch.served_name}",
        f"--port={PORT}",
        "--url-prefix=/v1",
    ]
    return None, [*args, *launch.args], {}, "/health"


def engine_container(launch: EngineLaunch) -> dict[str, Any]:
    """The entry container (``name: server``) for ``launch``."""
    command, args, env, health = _command(launch)
    merged = {**env, **(launch.env or {})}
    container: dict[str, Any] = {"name": "server", "image": launch.image}
    if command is not None:
        container["command"] = command
    if args:
        container["args"] = args
    if merged:
        container["env"] = [{"name": name, "value": merged[name]} for name in sorted(merged)]
    container["ports"] = [{"name": "http", "containerPort": PORT, "protocol": "TCP"}]
    container["readinessProbe"] = {
        "httpGet": {"path": health, "port": PORT},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    return container


def runtime_sidecar(served_name: str) -> dict[str, Any]:
    """Kthena's runtime sidecar (as a ModelBooster renders it) beside a vLLM entry container: the LoRA load endpoint.

    KubeAI downloads an adapter inside the pod and loads it into vLLM; kthena_py's adapter reconciler asks this
    sidecar (``POST /v1/load_lora_adapter`` on :data:`RUNTIME_PORT`), which downloads the adapter's url with
    Kthena's downloader and loads it into the engine on ``localhost``.
    """
    return {
        "name": "runtime",
        "image": DEFAULT_RUNTIME_IMAGE,
        "args": [
            "--port",
            str(RUNTIME_PORT),
            "--engine",
            "vllm",
            "--engine-base-url",
            f"http://localhost:{PORT}",
            "--engine-metrics-path",
            "/metrics",
            "--pod",
            "$(POD_NAME).$(NAMESPACE)",
            "--model",
            served_name,
        ],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "ports": [{"name": "runtime", "containerPort": RUNTIME_PORT, "protocol": "TCP"}],
    }
