#!/usr/bin/env python3
"""Print manifests/webhook's webhook configurations re-pointed at a URL, for a manager outside the cluster.

Usage: hack/local-webhooks.py https://127.0.0.1:19443 | kubectl apply --server-side -f -

Each webhook keeps its rules, failure policy, timeouts and path; only ``clientConfig.service`` becomes
``clientConfig.url`` (URL + path). ``caBundle`` stays empty: the manager (``--webhook-cert-mode=self`` with
``--webhook-host`` for the URL's host) fills it in, as it does in a cluster. ``hack/local-up.sh`` uses this.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = ("validating_webhook_configuration.yaml", "mutating_webhook_configuration.yaml")


def repoint(document: dict, url: str) -> dict:
    """Replace every webhook's ``clientConfig.service`` with ``clientConfig.url`` (URL + the service's path)."""
    for webhook in document["webhooks"]:
        service = webhook["clientConfig"].pop("service")
        webhook["clientConfig"]["url"] = url.rstrip("/") + service["path"]
    return document


def main(argv: list[str]) -> int:
    """Print the re-pointed configurations; exit status 2 on bad usage."""
    if len(argv) != 2 or not argv[1].startswith("https://"):
        print(__doc__, file=sys.stderr)
        return 2
    folder = ROOT / "manifests" / "webhook"
    documents = [repoint(yaml.safe_load((folder / name).read_text()), argv[1]) for name in FILES]
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
