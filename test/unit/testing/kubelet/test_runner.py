"""Which local program stands in for a container."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from kthena_py.testing.kubelet import CommandMapper
from kthena_py.testing.kubelet.runner import LocalCommand, image_name

PY = sys.executable


@pytest.mark.parametrize(
    ("container", "argv"),
    [
        ({"command": ["kthena-py", "download"], "args": ["-s", "x"]}, [PY, "-m", "kthena_py", "download", "-s", "x"]),
        ({"command": ["/usr/local/bin/kthena-py"]}, [PY, "-m", "kthena_py"]),
        ({"command": ["python3", "-c", "pass"]}, [PY, "-c", "pass"]),
        ({"command": ["python"], "args": ["x.py"]}, [PY, "x.py"]),
        ({"command": ["/bin/sh", "-c", "true"]}, ["/bin/sh", "-c", "true"]),
        ({"command": ["nginx"]}, None),
        ({"image": "nginx:1.27"}, None),
        ({"image": "reg.local:5000/team/kthena-py:v1", "args": ["download"]}, [PY, "-m", "kthena_py", "download"]),
        ({"image": "reg.local:5000/team/kthena-py@sha256:ab", "args": []}, [PY, "-m", "kthena_py"]),
    ],
)
def test_default_mapping(container: dict[str, Any], argv: list[str] | None) -> None:
    mapper = CommandMapper(images={"reg.local:5000/team/kthena-py:latest": ["kthena-py"]})
    command = mapper.argv(container)
    assert (command and [*command.program, *command.args]) == argv


def test_only_the_containers_own_arguments_are_subject_to_rewriting() -> None:
    command = CommandMapper().argv({"command": ["kthena-py", "download"], "args": ["-o", "/models"]})
    assert command == LocalCommand((PY, "-m", "kthena_py"), ("download", "-o", "/models"))


def test_custom_programs_replace_the_defaults() -> None:
    mapper = CommandMapper(programs={"vllm": ["/bin/echo", "vllm"]})
    assert mapper.argv({"command": ["vllm", "serve"]}) == LocalCommand(("/bin/echo", "vllm"), ("serve",))
    assert mapper.argv({"command": ["python3"]}) is None


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("nginx", "nginx"),
        ("nginx:1.27", "nginx"),
        ("reg:5000/a/b", "reg:5000/a/b"),
        ("reg:5000/a/b:1", "reg:5000/a/b"),
        ("a/b:1@sha256:00", "a/b"),
    ],
)
def test_image_name(image: str, name: str) -> None:
    assert image_name(image) == name
