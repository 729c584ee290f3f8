"""The cut points a lease group reconciles under, as its slot map's Lease records them, and when to cut again.

With per-range informers (``--shard-informers``) a slot is a range of the API server's *raw* namespace hash, cut
where the cluster's namespaces are (:mod:`.cuts`); the cuts in force, their generation and a proposed recut are kept
next to the slot map, in the annotation :data:`~kthena_py.vocab.labels.SHARD_CUTS` of the same Lease, so a change
of cuts and a change of owners are ordered by one resourceVersion.

Guarantees (pure, deterministic, no clock):

* :func:`encode_cuts` and :func:`decode_cuts` round-trip a :class:`CutState`; an absent, unreadable or malformed
  record (wrong number of bounds, not strictly increasing from 0 to the space's end) decodes to ``None``, never to
  cuts that could give one namespace two slots.
* :func:`shares_drifted` says whether the namespaces' shares under the cuts have drifted enough to cut again: some
  slot holds more than twice the even share (rounded up) plus one. Cuts planned from the same namespaces never
  drift (:func:`~.cuts.plan_cuts` gives every slot floor or ceil of the even share), so a group does not recut in
  a loop; a family of names created after the cut (they share their raw top bits and land in one slot) does.
* :func:`propose_recut` returns the state to write to ask for a recut: the cuts in force unchanged, the new cuts
  as ``pending``. It proposes nothing while a recut is pending (the handover rule applies it first) or while the
  shares are even. A group with no record yet starts from :func:`initial_state`: generation 0 (even cuts of the
  empty space) with its first cuts pending, so even the first cuts take effect only through the recut step, after
  every owner under an older reading of the slots has released.
* :func:`applied` is the record after the recut step: the pending cuts in force, the generation one higher.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .cuts import plan_cuts, slot_at
from .hashing import SLOT_COUNT, SPACE

__all__ = [
    "CutState",
    "applied",
    "decode_cuts",
    "encode_cuts",
    "initial_state",
    "propose_recut",
    "shares_drifted",
]


@dataclass(frozen=True)
class CutState:
    """The cuts in force (``cuts[i]`` to ``cuts[i + 1]`` is slot ``i``), their generation, a proposed recut."""

    generation: int
    cuts: tuple[int, ...]
    pending: tuple[int, ...] | None = None


def _valid(bounds: Sequence[int], slot_count: int) -> bool:
    return (
        len(bounds) == slot_count + 1
        and bounds[0] == 0
        and bounds[-1] == SPACE
        and all(a < b for a, b in itertools.pairwise(bounds))
    )


def _hex(bounds: Sequence[int]) -> list[str]:
    return [f"0x{b:x}" for b in bounds]


def _bounds(raw: object, slot_count: int) -> tuple[int, ...] | None:
    if not isinstance(raw, list) or not all(isinstance(b, str) for b in raw):
        return None
    try:
        bounds = tuple(int(b, 16) for b in raw)
    except ValueError:
        return None
    return bounds if _valid(bounds, slot_count) else None


def encode_cuts(state: CutState) -> str:
    """The annotation value recording ``state`` (bounds as hex strings)."""
    body: dict[str, object] = {"generation": state.generation, "cuts": _hex(state.cuts)}
    if state.pending is not None:
        body["pending"] = _hex(state.pending)
    return json.dumps(body, separators=(",", ":"))


def decode_cuts(raw: str | None, slot_count: int = SLOT_COUNT) -> CutState | None:
    """The state an annotation value records, or ``None`` when absent or not a valid record."""
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("generation"), int):
        return None
    cuts = _bounds(body.get("cuts"), slot_count)
    if cuts is None:
        return None
    pending = None
    if body.get("pending") is not None:
        pending = _bounds(body["pending"], slot_count)
        if pending is None:
            return None
    return CutState(int(body["generation"]), cuts, pending)


def initial_state(hashes: Iterable[int], slot_count: int = SLOT_COUNT) -> CutState:
    """A group's first record: generation 0 on even cuts, the namespaces' cuts pending."""
    return CutState(0, plan_cuts((), slot_count), plan_cuts(hashes, slot_count))


def shares_drifted(hashes: Iterable[int], cuts: Sequence[int]) -> bool:
    """Whether some slot holds more than twice the even share (rounded up) plus one of ``hashes``."""
    points = set(hashes)
    if not points:
        return False
    slot_count = len(cuts) - 1
    counts = [0] * slot_count
    for h in points:
        counts[slot_at(h, cuts)] += 1
    return max(counts) > 2 * math.ceil(len(points) / slot_count) + 1


def propose_recut(state: CutState, hashes: Iterable[int]) -> CutState | None:
    """The record asking for a recut, or ``None`` when one is pending already or the shares are even enough."""
    points = sorted(set(hashes))
    if state.pending is not None or not shares_drifted(points, state.cuts):
        return None
    return CutState(state.generation, state.cuts, plan_cuts(points, len(state.cuts) - 1))


def applied(state: CutState) -> CutState:
    """The record once the recut step has run: the pending cuts in force, one generation later."""
    if state.pending is None:
        return state
    return CutState(state.generation + 1, state.pending, None)
