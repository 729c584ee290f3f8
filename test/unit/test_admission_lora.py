"""The ModelServing webhook refuses bad LoRA annotations, on CREATE and on a metadata-only UPDATE that changes them."""

from __future__ import annotations

import copy
import json
from typing import Any

from plan.modelserving.statuscases import CASES

from kthena_py.controllers.admission.handlers import validator
from kthena_py.runtime.webhook import AdmissionRequest
from kthena_py.vocab.labels import LORA_ADAPTERS, LORA_ENDPOINT

PATH = f"metadata.annotations[{LORA_ADAPTERS}]"


def request(operation: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    body: dict[str, Any] = {"uid": "u", "operation": operation, "name": "llama", "namespace": "ns", "object": new}
    if old is not None:
        body["oldObject"] = old
    return AdmissionRequest.from_dict(body)


def with_annotations(doc: dict[str, Any], **annotations: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("annotations", {}).update(annotations)
    return doc


async def test_create_and_metadata_only_update() -> None:
    validate = validator("ModelServing")
    base = CASES["healthy"]().doc
    good = with_annotations(base, **{LORA_ADAPTERS: json.dumps([{"name": "fin", "source": "hf://a/fin"}])})
    assert (await validate(request("CREATE", good))).allowed
    bad = with_annotations(
        base, **{LORA_ADAPTERS: json.dumps([{"name": "fin", "source": "hf://a/fin"}, {"name": "fin", "source": "x"}])}
    )
    refused = await validate(request("CREATE", bad))
    assert not refused.allowed and [c.field for c in refused.causes] == [f"{PATH}[1].name"]
    assert "listed twice" in refused.message
    # The spec is unchanged: only the annotation changes, and it is still checked.
    refused = await validate(request("UPDATE", bad, good))
    assert not refused.allowed and [c.field for c in refused.causes] == [f"{PATH}[1].name"]
    engine = with_annotations(good, **{LORA_ENDPOINT: "engine"})
    refused = await validate(request("UPDATE", engine, good))
    assert not refused.allowed and [c.field for c in refused.causes] == [f"{PATH}[0].source"]
    # An unrelated metadata change leaves an old (already stored) bad value alone.
    relabelled = with_annotations(bad, other="x")
    assert (await validate(request("UPDATE", relabelled, bad))).allowed
