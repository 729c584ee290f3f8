"""Ready-made fault interceptors for :meth:`FakeKube.intercept <kthena_py.testing.fake.FakeKube.intercept>`.

Guarantees: a :class:`Refusal` fails exactly the calls it matches (verb, and when given the resource type,
subresource and name), with the error it was given, at most ``times`` times (every time when ``None``); every other
call passes untouched. :attr:`Refusal.refused` lists the calls it failed, in order, so a test can assert that the
code under test really met the fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kthena_py.kube.errors import ApiError
from kthena_py.kube.resources import ResourceType

from .calls import Call, Verb

__all__ = ["ANY", "Refusal", "refuse"]

ANY = "*"
"""Matches any subresource, the main resource included (the default of :func:`refuse`)."""


@dataclass
class Refusal:
    """An interceptor failing the matching calls with ``error`` (see the module docstring)."""

    error: ApiError
    verb: Verb
    rt: ResourceType | None = None
    subresource: str | None = ANY
    name: str | None = None
    times: int | None = None
    refused: list[Call] = field(default_factory=list)

    def matches(self, call: Call) -> bool:
        """Whether ``call`` is one this refusal fails (ignoring how often it already did)."""
        return (
            call.verb == self.verb
            and (self.rt is None or call.rt == self.rt)
            and (self.subresource == ANY or call.subresource == self.subresource)
            and (self.name is None or call.name == self.name)
        )

    def __call__(self, call: Call) -> None:
        """Fail ``call`` if it matches and the refusal has refusals left; else let it pass."""
        if not self.matches(call) or (self.times is not None and len(self.refused) >= self.times):
            return
        self.refused.append(call)
        raise self.error


def refuse(
    error: ApiError,
    verb: Verb,
    rt: ResourceType | None = None,
    *,
    subresource: str | None = ANY,
    name: str | None = None,
    times: int | None = None,
) -> Refusal:
    """A :class:`Refusal`: fail ``verb`` calls (of ``rt``, its ``subresource``, object ``name``) with ``error``.

    ``subresource=None`` matches only the main resource; the default :data:`ANY` matches every subresource too.
    """
    return Refusal(error, verb, rt, subresource, name, times)
