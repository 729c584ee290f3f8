"""A real API client that counts its requests, to show a hot loop (or its absence) as numbers.

Guarantees: behaves exactly like :class:`~kthena_py.kube.KubeClient` (it is one); every request it sends
is counted once in :attr:`CountingClient.requests` under ``(method, name)``, where ``name`` is the object
a request is about (the created object's name for a POST, the last path segment otherwise; watches are
counted under ``("WATCH", <resource>)``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kthena_py.kube import KubeClient


class CountingClient(KubeClient):
    """A :class:`KubeClient` that counts the requests it sends, by method and object name."""

    def __init__(self, api_client: Any, *, user_agent: str = "kthena-py") -> None:
        super().__init__(api_client, user_agent=user_agent)
        self.requests: Counter[tuple[str, str]] = Counter()

    async def _open(self, method: str, path: str, **kw: Any) -> Any:
        self.requests[_key(method, path, kw)] += 1
        return await super()._open(method, path, **kw)

    def total(self, method: str | None = None) -> int:
        """Requests sent so far (of one method, if given)."""
        return sum(n for (m, _), n in self.requests.items() if method is None or m == method)


def _key(method: str, path: str, kw: dict[str, Any]) -> tuple[str, str]:
    body, query = kw.get("body"), kw.get("query") or {}
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if method == "GET" and query.get("watch"):
        return ("WATCH", last)
    if method == "POST" and isinstance(body, dict):
        return (method, str((body.get("metadata") or {}).get("name") or last))
    return (method, last)
