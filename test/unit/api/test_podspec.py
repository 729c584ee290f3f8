from __future__ import annotations

from decimal import Decimal

from kthena_py.api import ModelServing
from kthena_py.api.podspec import (
    container_images,
    container_resources,
    sum_resources,
    template_containers,
    template_init_containers,
)

from .corpus import load_base


def test_template_helpers_read_the_pod_spec() -> None:
    ms = ModelServing.model_validate(load_base("modelserving-pd"))
    prefill, decode = ms.spec.template.roles
    assert container_images(prefill.entry_template) == ["vllm/vllm-openai:v0.10.1"]
    assert [c["name"] for c in template_init_containers(decode.entry_template)] == ["fetch"]
    requests = sum_resources(template_containers(prefill.entry_template) + template_containers(prefill.worker_template))
    assert requests == {"cpu": Decimal("15.5"), "memory": Decimal(180 * 2**30), "nvidia.com/gpu": Decimal(16)}
    limits = container_resources(template_containers(prefill.entry_template)[0], "limits")
    assert limits == {"memory": Decimal(96 * 2**30), "nvidia.com/gpu": Decimal(8)}
    assert template_containers(None) == []


def test_helpers_skip_malformed_entries() -> None:
    container = {"resources": {"requests": {"cpu": "lots", "memory": True, "gpu": 1}, "limits": []}}
    assert container_resources(container) == {"gpu": Decimal(1)}
    assert container_resources(container, "limits") == {}
    assert sum_resources([{"resources": {"requests": {"cpu": "9223372036854775807"}}}] * 3) == {
        "cpu": Decimal(3 * (2**63 - 1))
    }
