"""Read the metadata of a staged model directory: its primary GGUF's header and its ``config.json``.

:func:`primary_gguf` (pure) picks the GGUF whose header describes the model: the first file the request named
(``spec.files`` order; a pattern counts by its first match, preferring a first shard), else the first shard of
a split model (``*-00001-of-*.gguf``, where llama.cpp keeps the metadata), else the only ``.gguf`` (multimodal
projector files, ``mmproj*``, do not count when a model file is there). Several candidates and no rule to
choose: none (no guess).

:func:`inspect_model` opens at most two files of the directory it is given: the GGUF, read through
:func:`~.gguf.read_header` (so at most :data:`~.gguf.MAX_METADATA_BYTES`, normally the few MiB of the header,
never the weights), and ``config.json`` at the directory's top, read only when it is at most
:data:`MAX_CONFIG_BYTES`. It never raises: a file that cannot be read or parsed leaves its part ``None`` and
says why in ``errors``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .gguf import GGUFError, GGUFInfo, gguf_info, read_header
from .hfconfig import ConfigInfo, config_info

__all__ = ["CONFIG_NAME", "MAX_CONFIG_BYTES", "ModelMetadata", "inspect_model", "primary_gguf"]

CONFIG_NAME = "config.json"
MAX_CONFIG_BYTES = 1 << 20
"""A larger ``config.json`` is not read (real ones are a few KiB)."""

_FIRST_SHARD = re.compile(r"-0*1-of-\d+\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class ModelMetadata:
    """What a staged model says about itself; ``errors`` says why a part is missing although its file is there."""

    gguf: GGUFInfo | None = None
    config: ConfigInfo | None = None
    errors: tuple[str, ...] = ()


def _is_gguf(name: str) -> bool:
    return name.lower().endswith(".gguf")


def _matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) if any(c in pattern for c in "*?[") else name == pattern


def _prefer_first_shard(names: Sequence[str]) -> str:
    shards = [n for n in names if _FIRST_SHARD.search(n)]
    return shards[0] if shards else names[0]


def primary_gguf(names: Iterable[str], requested: Sequence[str] = ()) -> str | None:
    """The GGUF file whose header describes the model (see the module docstring), or ``None``."""
    ggufs = sorted(n for n in names if _is_gguf(n))
    if not ggufs:
        return None
    for pattern in requested:
        hits = [n for n in ggufs if _matches(pattern, n)]
        if hits:
            return _prefer_first_shard(hits)
    shards = [n for n in ggufs if _FIRST_SHARD.search(n)]
    if len(shards) == 1:
        return shards[0]
    models = [n for n in ggufs if not os.path.basename(n).lower().startswith("mmproj")] or ggufs
    return models[0] if len(models) == 1 else None


def _read_gguf(path: str, name: str) -> GGUFInfo:
    with open(path, "rb") as stream:
        return gguf_info(read_header(stream), file_name=name)


def _read_config(path: str) -> ConfigInfo | str:
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        return f"{CONFIG_NAME}: {size} bytes is over the {MAX_CONFIG_BYTES}-byte cap"
    with open(path, "rb") as stream:
        data = stream.read(MAX_CONFIG_BYTES + 1)
    try:
        return config_info(json.loads(data))
    except (ValueError, RecursionError) as exc:
        return f"{CONFIG_NAME}: not JSON ({str(exc)[:120]})"


def inspect_model(directory: str, names: Iterable[str], requested: Sequence[str] = ()) -> ModelMetadata:
    """The metadata of the staged files ``names`` (relative to ``directory``); never raises."""
    names = list(names)
    errors: list[str] = []
    gguf: GGUFInfo | None = None
    primary = primary_gguf(names, requested)
    if primary is not None:
        try:
            gguf = _read_gguf(os.path.join(directory, primary), primary)
        except GGUFError as exc:
            errors.append(f"{primary}: {exc}")
        except OSError as exc:
            errors.append(f"{primary}: {exc.strerror or exc}")
    config: ConfigInfo | None = None
    if CONFIG_NAME in names:
        try:
            found = _read_config(os.path.join(directory, CONFIG_NAME))
        except OSError as exc:
            found = f"{CONFIG_NAME}: {exc.strerror or exc}"
        if isinstance(found, str):
            errors.append(found)
        elif not found.empty:
            config = found
    return ModelMetadata(gguf=gguf, config=config, errors=tuple(errors))
