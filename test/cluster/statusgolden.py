"""``kthena-py status`` against golden files in the cluster tier (issue 25).

Golden files are ``golden/status/<case>.txt``: the text tree of :func:`~kthena_py.cli.status.status_text` without
ages, after :func:`mask`. ``KTHENA_PY_UPDATE_GOLDEN=1`` rewrites them (as the unit goldens of
``test/unit/plan/modelserving/test_status_view.py``); review the diff before committing.

The cluster settles on its own time (a PodGroup goes Pending -> Inqueue, a reconcile rewrites a condition a moment
after the one a test waited for), so the comparison is eventual: the tree is read again until it matches, and a
timeout fails with the last read. Rewriting waits for the tree to read the same three times in a row.

The scheduling goldens hold for ``test_scheduling_wait.py`` run whole, in its order: the nodes earlier cases add
stay for the session and show in Volcano's fit errors ("0/5 nodes are unavailable") and "largest node offers".
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
from pathlib import Path

from kthena_py.cli.status import status_text
from kthena_py.kube import KubeClient

GOLDEN = Path(__file__).parent / "golden" / "status"
UPDATE_ENV = "KTHENA_PY_UPDATE_GOLDEN"

# Kubernetes' SafeEncodeString alphabet, 10 characters: ControllerRevision hashes.
_REVISION = re.compile(r"(?<![\w-])[bcdfghjklmnpqrstvwxz2456789]{10}(?![\w-])")
_NODE = re.compile(r"(?<![\w-])(?:kwok-node-\d+|gpu\d+-node)(?![\w-])")
# A Go duration (1s, 250ms, 1m30s, 2h0m0s, 1.5s) after "waiting" / "for" / "after": times in condition messages.
_DURATION = re.compile(r"\b(waiting|after|for) \d+(?:\.\d+)?(?:ms|h|m|s)(?:\d+(?:\.\d+)?(?:ms|m|s))*\b")


def mask(text: str, namespace: str) -> str:
    """``text`` with what varies from run to run replaced by a placeholder.

    * the test's namespace -> ``<ns>``, then its random six-character suffix (also the tail of per-test queue and
      PriorityClass names) -> ``<suffix>``;
    * ControllerRevision hashes -> ``<rev1>``, ``<rev2>``... numbered in order of first appearance (two revisions
      stay told apart, their values do not matter);
    * kwok node names (``kwok-node-N``, ``gpuN-node``) -> ``<node>``: Volcano picks among equal nodes;
    * a duration after "waiting", "after" or "for" (``after waiting 1s``) -> ``<t>``.
    """
    text = text.replace(namespace, "<ns>").replace(namespace[-6:], "<suffix>")
    revisions: dict[str, str] = {}

    def revision(match: re.Match[str]) -> str:
        return revisions.setdefault(match.group(0), f"<rev{len(revisions) + 1}>")

    text = _REVISION.sub(revision, text)
    text = _NODE.sub("<node>", text)
    return _DURATION.sub(r"\1 <t>", text)


async def masked_status(kube: KubeClient, namespace: str, name: str) -> str:
    """``kthena-py status NAME -n NAMESPACE`` (text, no ages, no colour), masked."""
    return mask(await status_text(kube, name, namespace, ages=False), namespace)


async def assert_status_golden(kube: KubeClient, namespace: str, name: str, case: str, timeout: float = 30) -> str:
    """The status of ``name`` reads ``golden/status/<case>.txt`` (within ``timeout``); returns the text."""
    path = GOLDEN / f"{case}.txt"
    if os.environ.get(UPDATE_ENV) == "1":
        seen: list[str] = []
        for _ in range(max(3, int(timeout))):  # three reads a second apart that agree
            seen.append(await masked_status(kube, namespace, name))
            if len(seen) >= 3 and len(set(seen[-3:])) == 1:
                break
            await asyncio.sleep(1)
        else:
            raise AssertionError(f"{case}: the status did not settle:\n{seen[-1]}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(seen[-1], encoding="utf-8")
    want = path.read_text(encoding="utf-8")
    for _ in range(max(1, int(timeout * 2))):  # re-read every 0.5 s while the cluster settles
        text = await masked_status(kube, namespace, name)
        if text == want:
            print(f"\n{case}:\n{text}", end="")
            return text
        await asyncio.sleep(0.5)
    diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), "golden", "cluster"))
    raise AssertionError(f"{case}: the status differs from {path.name}; review the diff:\n{diff}")
