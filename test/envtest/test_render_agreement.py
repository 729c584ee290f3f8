"""Offline tools agree with the API server, for every example under examples/.

For each ModelServing, AutoscalingPolicy and ModelBooster document of every example file:

* the API server accepts it under strict field validation (what ``kubectl apply`` asks for), as
  ``kthena-py validate`` says it would;
* the object it stores has exactly the spec of :func:`kthena_py.api.structural.with_defaults` (the CRD's
  structural defaults, e.g. ``protocol: TCP`` on container ports);
* for a ModelServing, ``kthena-py render`` of the file reports the revision the controller's planner derives from
  the stored object (so the ``modelserving.volcano.sh/revision`` a user reads offline is the one the pods get).

And an unknown field inside a pod template is refused by the server and by ``kthena-py validate`` with the same
field path.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api.structural import with_defaults
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELBOOSTERS, MODELSERVINGS
from kthena_py.kube import ApiError, KubeClient
from kthena_py.main import main
from kthena_py.plan.modelserving.offline.render import render

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
RESOURCES = {"ModelServing": MODELSERVINGS, "AutoscalingPolicy": AUTOSCALINGPOLICIES, "ModelBooster": MODELBOOSTERS}
REVISION = "modelserving.volcano.sh/revision"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") in RESOURCES]


def _revision(objects: list[dict[str, Any]]) -> str:
    revisions = [o for o in objects if o["kind"] == "ControllerRevision"]
    assert len(revisions) == 1, [o["kind"] for o in objects]
    return str(revisions[0]["metadata"]["labels"][REVISION])


async def _create_strict(kube: KubeClient, document: dict[str, Any], namespace: str) -> dict[str, Any]:
    resource = RESOURCES[document["kind"]]
    body = copy.deepcopy(document)
    body["metadata"]["namespace"] = namespace
    return await kube.request(
        "POST", resource.path(namespace), body=body, query={"fieldValidation": "Strict"}, timeout=60
    )


def test_examples_exist() -> None:
    kinds = {d["kind"] for path in EXAMPLES for d in _documents(path)}
    assert {"ModelServing", "AutoscalingPolicy"} <= kinds


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLES])
async def test_render_and_defaults_agree_with_the_stored_object(
    path: Path, kube: KubeClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = _documents(path)
    assert documents, f"{path} holds none of our kinds"
    assert main(["validate", "-q", "-f", str(path)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["render", "-f", str(path)]) == 0
    rendered = yaml.safe_load(capsys.readouterr().out)["items"]
    offline: dict[str, list[dict[str, Any]]] = {}
    for item in rendered:
        owner = item["metadata"]["labels"].get("modelserving.volcano.sh/name")
        offline.setdefault(owner, []).append(item)
    for document in documents:
        stored = await _create_strict(kube, document, namespace)
        name = document["metadata"]["name"]
        assert stored["spec"] == with_defaults(document)["spec"], f"{document['kind']}/{name}"
        if document["kind"] != "ModelServing":
            continue
        live = await kube.get(MODELSERVINGS, name, namespace)
        assert _revision(offline[name]) == _revision(render(live)), name


async def test_an_unknown_pod_field_is_refused_with_the_path_validate_reports(
    kube: KubeClient, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _documents(ROOT / "examples" / "modelserving-pd.yaml")[0]
    document["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    path = "spec.template.roles[0].entryTemplate.spec.containers[0].imagePullPolice"
    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump(document))
    assert main(["validate", "-f", str(file)]) == 1
    assert f'unknown field "{path}"' in capsys.readouterr().out
    with pytest.raises(ApiError) as caught:
        await _create_strict(kube, document, namespace)
    assert f'unknown field "{path}"' in str(caught.value)
