"""The parts of kubernetes-asyncio the client uses, without loading its ~850 generated API and model modules.

:class:`~kthena_py.kube.client.KubeClient` needs only kubernetes-asyncio's ``Configuration``, ``ApiClient``
(the transport) and its kubeconfig and in-cluster loaders. Importing the package the usual way runs
``kubernetes_asyncio/__init__.py`` and ``kubernetes_asyncio/client/__init__.py``, which import every generated
API class and model: about 850 modules and 33 MiB of resident memory that the manager never uses.

Guarantees:

* :func:`load` returns those four things. When kubernetes-asyncio is not imported yet, it registers the packages
  ``kubernetes_asyncio`` and ``kubernetes_asyncio.client`` (and ``client.models``) as empty packages over the real
  directories and imports only the submodules it needs (about 15 modules).
* Nothing else changes for other code in the process: the first access to any other name of one of those
  packages (``from kubernetes_asyncio.client import CoreV1Api``, ``kubernetes_asyncio.watch``) runs the package's
  real ``__init__`` in place, so the package becomes exactly what a normal import makes it.
* When kubernetes-asyncio was already imported the normal way, :func:`load` uses it as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Sdk", "load"]

_MACHINERY = frozenset({"__loader__", "__cached__", "__builtins__", "__path__", "__spec__", "__file__"})
"""Names the import system probes on a package; asking for them must not run the real ``__init__``."""
_PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


@dataclass(frozen=True)
class Sdk:
    """What the client takes from kubernetes-asyncio."""

    Configuration: Any
    ApiClient: Any
    load_kube_config: Any
    load_incluster_config: Any
    ConfigException: type[Exception]


_loaded: Sdk | None = None


class _LazyPackage(types.ModuleType):
    """A package whose real ``__init__`` runs on the first access to a name it does not have yet."""

    def __getattr__(self, name: str) -> Any:
        if name in _MACHINERY or self.__dict__.get("_kthena_completed"):
            raise AttributeError(name)
        directory = Path(str(self.__dict__["__file__"])).parent
        if (directory / f"{name}.py").is_file() or (directory / name / "__init__.py").is_file():
            return importlib.import_module(f"{self.__name__}.{name}")  # a submodule: that one alone
        self.__dict__["_kthena_completed"] = True
        init = Path(str(self.__dict__["__file__"]))
        code = compile(init.read_bytes(), str(init), "exec")
        exec(code, self.__dict__)
        return getattr(self, name)


def _register_light_packages() -> None:
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or spec.origin is None:
        raise ImportError("kubernetes_asyncio is not installed")
    root = Path(spec.origin).parent
    for name in _PACKAGES:
        directory = root.joinpath(*name.split(".")[1:])
        module = _LazyPackage(name)
        module.__file__ = str(directory / "__init__.py")
        module.__path__ = [str(directory)]
        module.__package__ = name
        module.__spec__ = importlib.util.spec_from_file_location(
            name, directory / "__init__.py", submodule_search_locations=[str(directory)]
        )
        sys.modules[name] = module
    sys.modules["kubernetes_asyncio"].__dict__["client"] = sys.modules["kubernetes_asyncio.client"]
    sys.modules["kubernetes_asyncio.client"].__dict__["models"] = sys.modules["kubernetes_asyncio.client.models"]


def load() -> Sdk:
    """The client's share of kubernetes-asyncio (see the module docstring)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    if "kubernetes_asyncio" not in sys.modules:
        _register_light_packages()
    client_pkg = sys.modules["kubernetes_asyncio.client"]
    configuration = importlib.import_module("kubernetes_asyncio.client.configuration").Configuration
    api_client = importlib.import_module("kubernetes_asyncio.client.api_client").ApiClient
    if isinstance(client_pkg, _LazyPackage):
        # kube_config does ``from kubernetes_asyncio.client import ApiClient, Configuration``.
        client_pkg.__dict__.setdefault("Configuration", configuration)
        client_pkg.__dict__.setdefault("ApiClient", api_client)
    kube_config = importlib.import_module("kubernetes_asyncio.config.kube_config")
    incluster = importlib.import_module("kubernetes_asyncio.config.incluster_config")
    exception = importlib.import_module("kubernetes_asyncio.config.config_exception").ConfigException
    _loaded = Sdk(configuration, api_client, kube_config.load_kube_config, incluster.load_incluster_config, exception)
    return _loaded
