"""The mini-kubelet runs pods bound to a manual node as local processes, and reports like a kubelet.

Everything but the processes is real: Jobs are run by kube-controller-manager's job-controller, pods reach the node
through Volcano (a one-member PodGroup in the open ``default`` queue) or ``spec.nodeName``, claims bind through the
persistentvolume-binder-controller to a pre-bound hostPath PV. Waits are bounded polls, never sleeps.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, NODES, PODGROUPS, PODS, SECRETS, ResourceType
from kthena_py.testing.kubelet import MiniKubelet
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.cluster

JOBS = ResourceType("batch", "v1", "Job", "jobs")
PVCS = ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")

WRITE_FILE = """
import os, sys
path, message = sys.argv[1], sys.argv[2]
with open(path, "w") as f:
    f.write(os.environ["POD_NAME"])
with open(message, "w") as f:
    f.write("wrote " + path.rsplit("/", 1)[-1])
"""
FAIL = """
import sys
print("fetching weights", file=sys.stderr)
with open(sys.argv[1], "w") as f:
    f.write("boom: no weights")
sys.exit(3)
"""


def python(name: str, script: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "python:3.11", "command": ["python3", "-c", script], "args": list(args), **extra}


def pod_spec(kubelet: MiniKubelet, *containers: dict[str, Any], via_volcano: bool, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "containers": list(containers),
    }
    if via_volcano:
        base.update(kubelet.placement(), schedulerName="volcano")
    else:
        base["nodeName"] = kubelet.node.name
    return {**base, **spec}


def pod(name: str, spec: dict[str, Any]) -> KubeObject:
    return {"metadata": {"name": name}, "spec": spec}


async def podgroup(kube: KubeClient, namespace: str, name: str) -> None:
    await kube.create(PODGROUPS, {"metadata": {"name": name}, "spec": {"minMember": 1, "queue": "default"}}, namespace)


async def wait_pod(kube: KubeClient, namespace: str, name: str, phase: str, timeout: float = 120) -> KubeObject:
    async def check() -> KubeObject | None:
        p = await kube.get(PODS, name, namespace)
        current = (p.get("status") or {}).get("phase")
        assert current not in {"Succeeded", "Failed"} - {phase}, p["status"]
        return p if current == phase else None

    found: KubeObject = await eventually(check, timeout=timeout, description=f"pod {name} {phase}")
    return found


def job_condition(job: KubeObject, type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (job.get("status") or {}).get("conditions") or [])


def terminated(p: KubeObject, container: str = "main") -> dict[str, Any]:
    statuses = {s["name"]: s for s in p["status"]["containerStatuses"]}
    state: dict[str, Any] = statuses[container]["state"]["terminated"]
    return state


async def test_a_volcano_scheduled_job_runs_to_complete_with_its_file_and_message(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    await podgroup(kube, namespace, "writer")
    container = python(
        "main",
        WRITE_FILE,
        "/data/out.txt",
        "/dev/termination-log",
        env=[{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
    )
    spec = pod_spec(
        mini_kubelet, container, via_volcano=True, volumes=[{"name": "data", "hostPath": {"path": "/srv/writer"}}]
    )
    job = {
        "metadata": {"name": "writer"},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "writer"}}, "spec": spec},
        },
    }
    await kube.create(JOBS, job, namespace)

    async def complete() -> KubeObject | None:
        j = await kube.get(JOBS, "writer", namespace)
        assert not job_condition(j, "Failed"), j["status"]
        return j if job_condition(j, "Complete") else None

    await eventually(complete, timeout=180, description="Job writer Complete")
    pods = (await kube.list(PODS, namespace, label_selector="job-name=writer")).items
    assert len(pods) == 1
    done = pods[0]
    name = done["metadata"]["name"]
    assert done["spec"]["nodeName"] == mini_kubelet.node.name
    assert done["status"]["phase"] == "Succeeded"
    assert done["status"]["podIP"].startswith("127.100.250.")
    state = terminated(done)
    assert (state["exitCode"], state["reason"], state["message"]) == (0, "Completed", "wrote out.txt")
    assert (mini_kubelet.host_path("/srv/writer") / "out.txt").read_text() == name


async def test_a_failing_container_fails_its_pod_and_the_job_backoff_makes_another(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    await podgroup(kube, namespace, "failing")
    spec = pod_spec(mini_kubelet, python("main", FAIL, "/dev/termination-log"), via_volcano=True)
    job = {
        "metadata": {"name": "failing"},
        "spec": {
            "backoffLimit": 1,
            "template": {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "failing"}}, "spec": spec},
        },
    }
    await kube.create(JOBS, job, namespace)

    async def two_failed() -> list[KubeObject] | None:
        pods = (await kube.list(PODS, namespace, label_selector="job-name=failing")).items
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        return failed if len(failed) == 2 else None

    failed = await eventually(two_failed, timeout=240, description="two failed pods of Job failing")
    for p in failed:
        state = terminated(p)
        assert (state["exitCode"], state["reason"], state["message"]) == (3, "Error", "boom: no weights")
        assert mini_kubelet.container_log(namespace, p["metadata"]["name"], "main") == "fetching weights\n"

    async def job_failed() -> bool:
        return job_condition(await kube.get(JOBS, "failing", namespace), "Failed")

    await eventually(job_failed, timeout=120, description="Job failing Failed")


async def test_two_pods_on_one_claim_see_the_same_files(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet, make_hostpath_volume: Any
) -> None:
    volume = make_hostpath_volume(namespace, "shared", "/exports/shared")
    claim = {
        "metadata": {"name": "shared"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    await kube.create(PVCS, claim, namespace)

    async def bound() -> KubeObject | None:
        c = await kube.get(PVCS, "shared", namespace)
        return c if (c.get("status") or {}).get("phase") == "Bound" else None

    assert (await eventually(bound, timeout=120, description="claim Bound"))["spec"]["volumeName"] == volume
    volumes = [{"name": "cache", "persistentVolumeClaim": {"claimName": "shared"}}]
    mount = [{"name": "cache", "mountPath": "/models", "subPath": "llm"}]
    write = python(
        "main", "import sys; open(sys.argv[1], 'w').write('weights-v1')", "/models/w.bin", volumeMounts=mount
    )
    await kube.create(PODS, pod("writer", pod_spec(mini_kubelet, write, via_volcano=False, volumes=volumes)), namespace)
    await wait_pod(kube, namespace, "writer", "Succeeded")

    read = python(
        "main",
        "import sys; open(sys.argv[2], 'w').write(open(sys.argv[1].split('=', 1)[1]).read())",
        "--weights=/models/w.bin",
        "/dev/termination-log",
        volumeMounts=mount,
    )
    await kube.create(PODS, pod("reader", pod_spec(mini_kubelet, read, via_volcano=False, volumes=volumes)), namespace)
    done = await wait_pod(kube, namespace, "reader", "Succeeded")
    assert terminated(done)["message"] == "weights-v1"
    assert (mini_kubelet.volume_path("/exports/shared") / "llm" / "w.bin").read_text() == "weights-v1"


async def test_env_from_the_pod_ip_a_secret_and_a_config_map(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    await kube.create(SECRETS, {"metadata": {"name": "hub"}, "stringData": {"token": "hf_secret"}}, namespace)
    config = {"metadata": {"name": "settings"}, "data": {"REVISION": "main", "WORKERS": "4"}}
    await kube.create(ResourceType("", "v1", "ConfigMap", "configmaps"), config, namespace)
    script = (
        "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps({k: os.environ.get(k) for k in sys.argv[2:]}))"
    )
    names = ["POD_IP", "HOST_IP", "TOKEN", "CFG_REVISION", "CFG_WORKERS", "URL"]
    container = python(
        "main",
        script,
        "/dev/termination-log",
        *names,
        envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        env=[
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}},
            {"name": "URL", "value": "http://$(POD_IP):8000/$(CFG_REVISION)"},
        ],
    )
    await kube.create(PODS, pod("env", pod_spec(mini_kubelet, container, via_volcano=False)), namespace)
    done = await wait_pod(kube, namespace, "env", "Succeeded")
    ip = done["status"]["podIP"]
    assert json.loads(terminated(done)["message"]) == {
        "POD_IP": ip,
        "HOST_IP": "127.0.0.1",
        "TOKEN": "hf_secret",
        "CFG_REVISION": "main",
        "CFG_WORKERS": "4",
        "URL": f"http://{ip}:8000/main",
    }


async def test_deleting_a_running_pod_kills_its_processes_and_removes_it(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    # The shell ignores SIGTERM, so only the SIGKILL after the grace period ends it (and its sleep child).
    # "$$$$" is the shell's "$$": Kubernetes turns "$$" into "$" in commands and args.
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", 'trap "" TERM; echo $$$$ > "$1"; while :; do sleep 1; done', "sh", "/run/pid"],
        "volumeMounts": [{"name": "run", "mountPath": "/run"}],
    }
    graceful = python(
        "graceful",
        "import signal, sys, time\n"
        "def bye(*_):\n    open(sys.argv[1], 'w').write('SIGTERM'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\nwhile True: time.sleep(1)",
        "/run/graceful",
        volumeMounts=[{"name": "run", "mountPath": "/run"}],
    )
    volumes = [{"name": "run", "emptyDir": {}}]
    spec = pod_spec(mini_kubelet, container, graceful, via_volcano=False, volumes=volumes)
    await kube.create(PODS, pod("sleeper", spec), namespace)
    running = await wait_pod(kube, namespace, "sleeper", "Running")
    assert {c["type"]: c["status"] for c in running["status"]["conditions"]} == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    pid_file = mini_kubelet.pod_dir(namespace, "sleeper") / "volumes" / "run" / "pid"
    pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), description="pid file"))
    assert mini_kubelet.pids(namespace, "sleeper")["main"] == pid
    os.kill(pid, 0)  # alive

    await kube.delete(PODS, "sleeper", namespace)

    async def gone() -> bool:
        try:
            await kube.get(PODS, "sleeper", namespace)
        except NotFound:
            return True
        return False

    await eventually(gone, timeout=120, description="pod sleeper gone")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert mini_kubelet.pids(namespace, "sleeper") == {}
    # The container that handles SIGTERM got it (and ended before the SIGKILL).
    assert (pid_file.parent / "graceful").read_text() == "SIGTERM"


async def test_an_unmappable_image_stays_pending_with_the_reason(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    container = {"name": "server", "image": "nginx:1.27"}
    await kube.create(PODS, pod("web", pod_spec(mini_kubelet, container, via_volcano=False)), namespace)

    async def waiting() -> dict[str, Any] | None:
        p = await kube.get(PODS, "web", namespace)
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        state = statuses[0]["state"].get("waiting") if statuses else None
        return state if state and state.get("reason") == "ErrImagePull" else None

    state = await eventually(waiting, timeout=120, description="ErrImagePull")
    assert 'container "server"' in state["message"] and "nginx:1.27" in state["message"]
    current = await kube.get(PODS, "web", namespace)
    assert current["status"]["phase"] == "Pending"
    events = (await kube.list(EVENTS, namespace, field_selector="involvedObject.name=web")).items
    assert any(e["reason"] == "Failed" and 'container "server"' in e["message"] for e in events)


async def test_stopping_a_kubelet_leaves_no_process_pod_or_node(
    kube: KubeClient, namespace: str, make_mini_kubelet: Any
) -> None:
    first, second = make_mini_kubelet(), make_mini_kubelet(gpus=2)
    sleep = python("main", "import time; time.sleep(600)")
    for kubelet in (first, second):
        spec = pod_spec(kubelet, sleep, via_volcano=False)
        await kube.create(PODS, pod(f"on-{kubelet.node.name}", spec), namespace)
    pids = {}
    for kubelet in (first, second):
        name = f"on-{kubelet.node.name}"
        running = await wait_pod(kube, namespace, name, "Running")
        pids[kubelet.node.name] = kubelet.pids(namespace, name)["main"]
        assert running["status"]["podIP"].startswith("127.100.250.")
    node = await kube.get(NODES, second.node.name)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert (
        len({(await kube.get(PODS, f"on-{k.node.name}", namespace))["status"]["podIP"] for k in (first, second)}) == 2
    )

    second.stop()

    with pytest.raises(ProcessLookupError):
        os.kill(pids[second.node.name], 0)
    with pytest.raises(NotFound):
        await kube.get(NODES, second.node.name)
    with pytest.raises(NotFound):
        await kube.get(PODS, f"on-{second.node.name}", namespace)
    os.kill(pids[first.node.name], 0)  # the other node's pod runs on


FLAKY = """
import os, sys
marker, init = sys.argv[1], sys.argv[2]
assert open(init).read() == "initialised"
if not os.path.exists(marker):
    open(marker, "w").write("failed once")
    sys.exit(7)
"""


async def test_init_containers_run_first_and_on_failure_restarts_the_container(
    kube: KubeClient, namespace: str, mini_kubelet: MiniKubelet
) -> None:
    mounts = [{"name": "work", "mountPath": "/work"}]
    init = python("init", "import sys; open(sys.argv[1], 'w').write('initialised')", "/work/init", volumeMounts=mounts)
    main = python("main", FLAKY, "/work/marker", "/work/init", volumeMounts=mounts)
    volumes = [{"name": "work", "emptyDir": {}}]
    spec = pod_spec(mini_kubelet, main, via_volcano=False, volumes=volumes, restartPolicy="OnFailure")
    spec["initContainers"] = [init]
    await kube.create(PODS, pod("flaky", spec), namespace)
    done = await wait_pod(kube, namespace, "flaky", "Succeeded")
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    status = done["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 7
    assert status["state"]["terminated"]["exitCode"] == 0
    assert mini_kubelet.container_log(namespace, "flaky", "main", restart_count=0) == ""
