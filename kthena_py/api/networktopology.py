"""Network-topology scheduling policy of a ServingGroup (Volcano's ``NetworkTopologySpec``).

Guarantees: the shape and schema constraints are Volcano's ``scheduling/v1beta1.NetworkTopologySpec``
(``mode`` enum ``hard|soft`` defaulting to ``hard``, ``highestTierAllowed >= 0``, ``highestTierName`` a DNS
subdomain of at most 253 characters). That ``highestTierAllowed`` and ``highestTierName`` are not both set is a
semantic rule, checked by :mod:`kthena_py.api.validation`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kthena_py.api.common import KthenaModel

__all__ = ["NetworkTopology", "NetworkTopologyMode", "NetworkTopologySpec"]

NetworkTopologyMode = Literal["hard", "soft"]

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class NetworkTopologySpec(KthenaModel):
    """Volcano's network-topology constraint for a PodGroup or one of its sub-groups."""

    mode: NetworkTopologyMode = "hard"
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str | None = Field(default=None, max_length=253, pattern=_DNS_SUBDOMAIN)


class NetworkTopology(KthenaModel):
    """Topology policies for the whole ServingGroup (``groupPolicy``) and for each role (``rolePolicy``)."""

    group_policy: NetworkTopologySpec | None = None
    role_policy: NetworkTopologySpec | None = None
