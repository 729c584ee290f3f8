"""``kthena-py status`` end to end over the in-memory API server: the command line, ``-o json`` and ``-w``.

The cluster holds the objects of the builder's golden cases (``plan/modelserving/statuscases.py``); what the
command prints must be what the pure renderer gives for them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from typing import Any

import pytest
from plan.modelserving.statuscases import CASES
from plan.modelserving.statusview import NAME, NOW, NS, World, running

from kthena_py.cli import status
from kthena_py.controllers.resources import MODELCACHES, MODELSERVINGS
from kthena_py.kube.errors import ApiUnavailable, NotFound
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES
from kthena_py.main import main
from kthena_py.plan.modelserving.view import build_view, render_text, status_document
from kthena_py.testing.fake import Call, FakeKube
from kthena_py.vocab.labels import MODEL_CACHE

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def seed(world: World) -> FakeKube:
    kube = FakeKube()
    kube.put(MODELSERVINGS, world.doc)
    for rt, objects in (
        (PODS, world.pods),
        (SERVICES, world.services),
        (PODGROUPS, world.podgroups),
        (CONTROLLER_REVISIONS, world.revisions),
    ):
        for obj in objects:
            kube.put(rt, obj)
    if world.tracker is not None:
        kube.put(CONFIGMAPS, world.tracker)
    return kube


def expected(world: World, now: float = NOW, colour: bool = False) -> str:
    view = build_view(
        world.doc,
        world.pods,
        now=now,
        services=world.services,
        podgroups=world.podgroups,
        revisions=world.revisions,
        tracker=world.tracker,
    )
    return render_text(view, colour=colour)


class Closing:
    """FakeKube with what the command needs of a KubeClient besides the seam (``close``, ``host``)."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.closed = False
        self.host = "https://fake"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status, "_clock", lambda: NOW)


def connected(monkeypatch: pytest.MonkeyPatch, kube: FakeKube) -> Closing:
    client = Closing(kube)

    async def connect(kubeconfig: str | None, context: str | None) -> tuple[Closing, str]:
        return client, NS

    monkeypatch.setattr(status, "connect", connect)
    return client


@pytest.mark.parametrize("case", sorted(CASES))
async def test_status_text_is_the_rendered_tree_of_what_the_cluster_holds(case: str) -> None:
    world = CASES[case]()
    assert await status.status_text(seed(world), NAME, NS, now=NOW) == expected(world)


async def test_status_text_reads_only_the_objects_of_its_modelserving() -> None:
    world = CASES["healthy"]()
    kube = seed(world)
    other = copy.deepcopy(world.pods[0])
    other["metadata"]["name"] = "other-0-prefill-0-0"
    other["metadata"]["labels"] = {k: v.replace("llama", "other") for k, v in other["metadata"]["labels"].items()}
    kube.put(PODS, other)
    text = await status.status_text(kube, NAME, NS, now=NOW)
    assert text == expected(world)
    lists = {(c.rt.plural, c.options.get("label_selector")) for c in kube.calls_of("list")}
    assert ("pods", "modelserving.volcano.sh/name=llama") in lists


def test_the_command_prints_the_tree_plain_when_piped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clock: None
) -> None:
    world = CASES["gpu-wait"]()
    client = connected(monkeypatch, seed(world))
    assert main(["status", NAME]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (expected(world), "")
    assert "\x1b" not in out
    assert client.closed


def test_colour_always_and_no_color(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clock: None
) -> None:
    world = CASES["crash-loop"]()
    connected(monkeypatch, seed(world))
    assert main(["status", NAME, "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" in out and ANSI.sub("", out) == expected(world)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["status", NAME]) == 0
    assert "\x1b[" in capsys.readouterr().out  # a terminal gets colour
    assert main(["status", NAME, "-o", "json"]) == 0
    json.loads(capsys.readouterr().out)  # JSON never does
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["status", NAME]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_json_output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clock: None) -> None:
    world = CASES["queue-full"]()
    connected(monkeypatch, seed(world))
    assert main(["status", NAME, "-n", NS, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    view = build_view(world.doc, world.pods, now=NOW, services=world.services, podgroups=world.podgroups)
    assert doc == json.loads(json.dumps(status_document(view)))
    whys = [p["why"] for g in doc["groups"] for i in g["instances"] for p in i["pods"]]
    assert {(w["kind"], w["queuePosition"]) for w in whys} == {("queue", 1)}
    assert doc["queue"] == "team-a"


def test_a_missing_modelserving_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = connected(monkeypatch, FakeKube())
    assert main(["status", "nope"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == 'kthena-py: error: neither a modelserving nor a modelpool "nope" in namespace team\n'
    assert client.closed


def test_an_unreachable_server_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = seed(CASES["healthy"]())

    def down(call: Call) -> None:
        raise ApiUnavailable("connection refused")

    kube.intercept(down)
    connected(monkeypatch, kube)
    assert main(["status", NAME]) == 1
    assert (
        capsys.readouterr().err == "kthena-py: error: cannot reach the API server at https://fake: connection refused\n"
    )


async def test_without_the_podgroup_crd_the_tree_has_no_podgroups() -> None:
    world = CASES["healthy"]()
    kube = seed(world)

    def not_served(call: Call) -> None:
        if call.rt == PODGROUPS:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")

    kube.intercept(not_served)
    snapshot = await status.read_snapshot(kube, NAME, NS)
    assert snapshot.podgroups == () and not snapshot.podgroups_served


# --- -w -------------------------------------------------------------------------------------------------------------


class Printed:
    """What ``follow`` wrote, and a way to wait for the next write."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.event = asyncio.Event()

    def __call__(self, text: str) -> None:
        self.texts.append(text)
        self.event.set()

    async def next(self, count: int) -> str:
        async with asyncio.timeout(5):
            while len(self.texts) < count:
                self.event.clear()
                await self.event.wait()
        return self.texts[count - 1]


def _ready_pod(kube: FakeKube, name: str) -> None:
    pod = kube.peek(PODS, name, NS)
    assert pod is not None
    pod["status"] = running(ago=0)
    kube.put(PODS, pod)


async def test_watch_renders_again_when_a_pod_becomes_ready_and_ends_on_deletion() -> None:
    world = CASES["image-pull"]()
    kube = seed(world)
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    first = await printed.next(1)
    assert first == expected(world)
    assert "image pull: ImagePullBackOff" in first

    _ready_pod(kube, "llama-0-decode-0-1")
    second = await printed.next(2)
    assert second.startswith("\n")  # trees are separated by a blank line
    assert "ImagePullBackOff" not in second
    assert re.search(r"llama-0-decode-0-1 +Running +ready", second)
    assert "decode-0  2/2 pods ready" in second

    await kube.delete(MODELSERVINGS, NAME, NS)
    assert await asyncio.wait_for(task, 5) == 0
    assert printed.texts[-1] == 'modelserving "llama" was deleted\n'
    assert len(printed.texts) == 3


async def test_watch_with_json_prints_one_document_per_change() -> None:
    world = CASES["image-pull"]()
    kube = seed(world)
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, output="json", clock=lambda: NOW, settle=0.01))
    first = json.loads(await printed.next(1))
    _ready_pod(kube, "llama-0-decode-0-1")
    line = await printed.next(2)
    assert line.endswith("\n") and "\n" not in line[:-1]
    second = json.loads(line)
    assert first["groups"][0]["ready"] is False and second["groups"][0]["ready"] is True
    await kube.delete(MODELSERVINGS, NAME, NS)
    assert await asyncio.wait_for(task, 5) == 0
    assert json.loads(printed.texts[-1]) == {"name": NAME, "namespace": NS, "deleted": True}


async def test_a_change_that_shows_nothing_new_prints_nothing() -> None:
    world = CASES["healthy"]()
    kube = seed(world)
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    await printed.next(1)
    pod = kube.peek(PODS, "llama-0-prefill-0-0", NS)
    assert pod is not None
    pod["metadata"].setdefault("annotations", {})["note"] = "unrelated"
    kube.put(PODS, pod)
    await asyncio.sleep(0.2)
    assert len(printed.texts) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_watch_that_fails_starts_again_from_a_fresh_read() -> None:
    world = CASES["image-pull"]()
    kube = seed(world)
    failures = iter([True])

    def flaky(call: Call) -> None:
        if call.verb == "watch" and call.rt == PODS and next(failures, False):
            raise ApiUnavailable("watch dropped")

    kube.intercept(flaky)
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    await printed.next(1)
    await asyncio.sleep(0.1)  # the failed watch is replaced
    _ready_pod(kube, "llama-0-decode-0-1")
    assert "decode-0  2/2 pods ready" in await printed.next(2)
    watches = [c for c in kube.calls_of("watch") if c.rt == PODS]
    assert len(watches) >= 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancelling_the_follow_leaves_no_watch_running() -> None:
    kube = seed(CASES["healthy"]())
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    await printed.next(1)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and "_pump" in repr(t.get_coro())]
    assert others == []


async def test_a_modelserving_missing_at_the_start_is_not_found() -> None:
    with pytest.raises(NotFound):
        await status.follow(FakeKube(), NAME, NS, Printed(), settle=0.01)


# --- -w and the named ModelCache -----------------------------------------------------------------------------------


def _model_cache(name: str, phase: str, bytes_done: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "observedGeneration": 1}
    if bytes_done is not None:
        status["progress"] = {"bytesDone": bytes_done, "bytesTotal": 4 * 1024**3, "filesDone": 0, "filesTotal": 2}
    return {
        "apiVersion": MODELCACHES.api_version,
        "kind": "ModelCache",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"source": f"hf://org/{name}", "storage": {"persistentVolumeClaim": {"claimName": "models"}}},
        "status": status,
    }


def _gated(cache: str) -> FakeKube:
    world = CASES["healthy"]()
    world.doc["metadata"].setdefault("annotations", {})[MODEL_CACHE] = cache
    return seed(world)


def _cache_line(text: str) -> str:
    return next(line.strip() for line in text.splitlines() if line.strip().startswith("ModelCache "))


async def test_watch_prints_again_when_the_named_model_cache_progresses_and_turns_ready() -> None:
    kube = _gated("llama-3")
    kube.put(MODELCACHES, _model_cache("llama-3", "Downloading", 1024**3))
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    assert _cache_line(await printed.next(1)).startswith("ModelCache llama-3: Downloading (25%, 1.0 GiB of 4.0 GiB)")

    kube.put(MODELCACHES, _model_cache("llama-3", "Downloading", 2 * 1024**3))
    assert _cache_line(await printed.next(2)).startswith("ModelCache llama-3: Downloading (50%, 2.0 GiB of 4.0 GiB)")

    kube.put(MODELCACHES, _model_cache("llama-3", "Ready"))
    assert _cache_line(await printed.next(3)).startswith("ModelCache llama-3: Ready, ")

    kube.put(MODELCACHES, _model_cache("another", "Failed"))  # not the named cache: nothing to print
    await asyncio.sleep(0.2)
    assert len(printed.texts) == 3
    await kube.delete(MODELSERVINGS, NAME, NS)
    assert await asyncio.wait_for(task, 5) == 0


async def test_watch_follows_the_cache_the_annotation_names_now() -> None:
    kube = _gated("llama-3")
    kube.put(MODELCACHES, _model_cache("llama-3", "Ready"))
    kube.put(MODELCACHES, _model_cache("llama-4", "Downloading", 0))
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    assert _cache_line(await printed.next(1)).startswith("ModelCache llama-3: Ready")

    ms = kube.peek(MODELSERVINGS, NAME, NS)
    assert ms is not None
    ms["metadata"]["annotations"][MODEL_CACHE] = "llama-4"
    kube.put(MODELSERVINGS, ms)
    assert _cache_line(await printed.next(2)).startswith("ModelCache llama-4: Downloading (0%")

    kube.put(MODELCACHES, _model_cache("llama-4", "Downloading", 3 * 1024**3))
    assert _cache_line(await printed.next(3)).startswith("ModelCache llama-4: Downloading (75%")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_without_the_model_cache_crd_the_watch_does_not_start_again_and_again() -> None:
    kube = _gated("llama-3")

    def not_served(call: Call) -> None:
        if call.rt == MODELCACHES:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")

    kube.intercept(not_served)
    printed = Printed()
    task = asyncio.create_task(status.follow(kube, NAME, NS, printed, clock=lambda: NOW, settle=0.01))
    assert _cache_line(await printed.next(1)).startswith("ModelCache llama-3: NotFound")
    await asyncio.sleep(0.2)
    assert len(kube.calls_of("watch", MODELCACHES)) == 1  # tried once, then left alone
    await kube.delete(PODS, "llama-0-prefill-0-0", NS)
    assert "llama-0-prefill-0-0" not in await printed.next(2)  # the other watches still work
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_adapters_are_listed_per_pod() -> None:
    from kthena_py.plan.adapters.desired import adapter_label, source_digest
    from kthena_py.vocab.labels import LORA_ADAPTERS, SERVING_ENTRY

    world = CASES["healthy"]()
    world.doc["metadata"].setdefault("annotations", {})[LORA_ADAPTERS] = json.dumps(
        [{"name": "fin", "source": "hf://a/fin"}, {"name": "law", "source": "hf://a/law"}]
    )
    entries = [p for p in world.pods if p["metadata"]["name"].endswith("-0-0")][:2]
    assert len(entries) == 2
    for pod in entries:
        pod["metadata"]["labels"][SERVING_ENTRY] = "true"
    entries[0]["metadata"]["labels"][adapter_label("fin")] = source_digest("hf://a/fin")
    entries[0]["metadata"]["labels"][adapter_label("law")] = source_digest("hf://a/law")
    entries[1]["metadata"]["labels"][adapter_label("fin")] = source_digest("hf://a/fin")
    entries[1]["metadata"]["labels"][adapter_label("law")] = source_digest("hf://OLD/law")  # an older source
    text = await status.status_text(seed(world), NAME, NS, now=NOW)
    first = next(line for line in text.splitlines() if entries[0]["metadata"]["name"] in line)
    second = next(line for line in text.splitlines() if entries[1]["metadata"]["name"] in line)
    assert first.endswith("adapters: fin, law"), first
    assert second.endswith("adapters: fin  not loaded: law"), second
    doc = json.loads(await status.status_text(seed(world), NAME, NS, now=NOW, output="json"))
    pods = [p for g in doc["groups"] for i in g["instances"] for p in i["pods"]]
    by_name = {p["name"]: p for p in pods}
    assert by_name[entries[1]["metadata"]["name"]]["adapters"] == ["fin"]
    assert by_name[entries[1]["metadata"]["name"]]["adaptersMissing"] == ["law"]
    workers = [p for p in pods if p["name"] not in {e["metadata"]["name"] for e in entries}]
    assert all("adaptersMissing" not in p for p in workers)
