"""``kthena-py shards``: which replica of a sharded manager owns which namespaces.

Guarantees: it only reads (the lease group's Leases in one namespace, and the Namespaces); a namespace is shown
with the member the group's slot map gives its hash slot to, or ``-`` when that slot has no owner (a hand-over in
progress). Building the parser imports only the standard library; the client is imported when the command runs.
Exit status: 0, or 1 when the API server cannot be reached or the group has no Leases.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .common import CommandError

__all__ = ["ShardView", "add_parser", "build_view", "render_text", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``shards``."""
    p = sub.add_parser(
        "shards",
        help="which replica of a sharded manager (--sharding) owns which namespaces",
        description="Reads the lease group's Leases and prints its members, their slots and each namespace's owner.",
    )
    p.add_argument("--lease-group", default="kthena-py-controller-manager", help="the manager's --lease-group")
    p.add_argument(
        "-n", "--namespace", default="kthena-system", help="where the group's Leases live (default kthena-system)"
    )
    p.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class ShardView:
    """A lease group as read: its members (id -> slots held, renew time) and each namespace's owner."""

    group: str
    members: dict[str, dict[str, Any]]
    namespaces: dict[str, str]
    unowned_slots: int


def build_view(
    group: str, leases: Sequence[Mapping[str, Any]], namespaces: Sequence[str], *, slot_count: int = 64
) -> ShardView:
    """Join the group's Leases (members and the slot map) with the namespaces' slots (raw cuts when recorded)."""
    from kthena_py.runtime.shards.member import ROLE_LABEL, namespace_owner, read_slot_map

    slot_map: dict[int, str] = {}
    slots_lease: dict[str, Any] = {}
    members: dict[str, dict[str, Any]] = {}
    for lease in leases:
        role = ((lease.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL)
        if role == "slots":
            slots_lease = dict(lease)
            slot_map = read_slot_map(slots_lease)
        elif role == "member":
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder:
                members[holder] = {"renewTime": spec.get("renewTime"), "slots": 0, "namespaces": 0}
    for owner in slot_map.values():
        members.setdefault(owner, {"renewTime": None, "slots": 0, "namespaces": 0})["slots"] += 1
    owners: dict[str, str] = {}
    for ns in sorted(namespaces):
        owner = namespace_owner(slots_lease, ns) or "-"
        owners[ns] = owner
        if owner in members:
            members[owner]["namespaces"] += 1
    return ShardView(group, members, owners, slot_count - len(slot_map))


def render_text(view: ShardView) -> str:
    """The view as two tables: members, then namespaces."""
    lines = [f"lease group {view.group}: {len(view.members)} member(s), {view.unowned_slots} slot(s) without owner", ""]
    rows = [["MEMBER", "SLOTS", "NAMESPACES", "RENEWED"]]
    rows += [[m, str(v["slots"]), str(v["namespaces"]), str(v["renewTime"] or "-")] for m, v in view.members.items()]
    rows += [[""], ["NAMESPACE", "OWNER"]]
    rows += [[ns, owner] for ns, owner in view.namespaces.items()]
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths.get(i, 0), len(cell))
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Read the group and print it."""
    import asyncio

    view = asyncio.run(_read(args))
    if args.output == "json":
        print(json.dumps({"group": view.group, "members": view.members, "namespaces": view.namespaces}, indent=2))
    else:
        print(render_text(view))
    return 0


async def _read(args: argparse.Namespace) -> ShardView:
    from kthena_py.kube import ApiError, ConfigError, KubeClient
    from kthena_py.kube.resources import LEASES, NAMESPACES
    from kthena_py.runtime.shards.member import GROUP_LABEL

    try:
        client = await KubeClient.from_environment(args.kubeconfig, args.context)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    try:
        leases = (await client.list(LEASES, args.namespace, label_selector=f"{GROUP_LABEL}={args.lease_group}")).items
        namespaces = [str(n["metadata"]["name"]) for n in (await client.list_all(NAMESPACES)).items]
    except ApiError as exc:
        raise CommandError(f"cannot read the lease group: {exc}") from exc
    finally:
        await client.close()
    if not leases:
        raise CommandError(f"no Leases of group {args.lease_group!r} in namespace {args.namespace!r}")
    return build_view(args.lease_group, leases, namespaces)
