"""The simulated kubelet as `kubectl` shows it (issue 34): ContainerCreating, the Scheduled,
Pulling, Pulled, Created, Started and Killing Events in `kubectl describe pod`, image errors
(ErrImagePull, ImagePullBackOff, InvalidImageName) that `kubectl set image` recovers from,
CrashLoopBackOff, a running container restarted for a new image, and the Deployment page's
rollback example (a mistyped image stalls the rollout; `kubectl rollout undo` recovers). Also
the admission a real cluster has by default, with kube-apiserver's answers on both servers:
ServiceAccount (the token volume, a missing ServiceAccount refused) and LimitRanger.

One `kcm dev` stack for the module (deployment and replicaset controllers; the serviceaccount
one too, which kube-apiserver's ServiceAccount admission needs), a namespace per test. The
start delay is long enough to see ContainerCreating, and the pull and restart back-offs are
scaled down to a fifth (2 s doubling) so that a test sees them run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--controllers",
    "deployment,replicaset,serviceaccount",
    "--pod-start-delay",
    "1.5",
    "--sim-backoff-scale",
    "0.2",
)
_counter = iter(range(1000))
TIMEOUT = 60.0


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"kubelet-{next(_counter)}"
    stack.create_namespace(name, TIMEOUT)
    yield name


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("-n", ns, "get", *what, "-o", "json").stdout)


def events(stack: devstack.DevStack, ns: str, pod: str) -> list[dict[str, Any]]:
    """The pod's Events, oldest first (by creation, which is their order here)."""
    items = get(stack, ns, "events", "--field-selector", f"involvedObject.name={pod}")["items"]
    return sorted(items, key=lambda e: (e["metadata"]["creationTimestamp"], e["metadata"]["name"]))


def seen(stack: devstack.DevStack, ns: str, pod: str) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in events(stack, ns, pod)]


def waiting_reason(stack: devstack.DevStack, ns: str, pod: str) -> str:
    statuses = get(stack, ns, "pod", pod).get("status", {}).get("containerStatuses") or [{}]
    return str(statuses[0].get("state", {}).get("waiting", {}).get("reason", ""))


def describe_events(stack: devstack.DevStack, ns: str, pod: str) -> list[list[str]]:
    """The rows of `kubectl describe pod`'s Events table: type, reason, (age,) from, message."""
    text = stack.kubectl("-n", ns, "describe", "pod", pod).stdout
    table = text.split("\nEvents:\n", 1)[1].splitlines()[2:]
    return [re.split(r"\s{2,}", row.strip(), maxsplit=4) for row in table if row.strip()]


def test_describe_shows_the_pod_start_and_stop_as_a_kubelet_reports_them(
    stack: devstack.DevStack, ns: str
) -> None:
    stack.kubectl("-n", ns, "run", "web", "--image=nginx:1.27")
    # The start delay is spent making the sandbox and pulling: `kubectl get pods` shows it.
    wait_for(
        lambda: waiting_reason(stack, ns, "web") == "ContainerCreating", TIMEOUT, what="ContainerCreating"
    )
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/web", f"--timeout={TIMEOUT:.0f}s")
    pod = get(stack, ns, "pod", "web")
    node = pod["spec"]["nodeName"]
    want = [
        ("Normal", "Scheduled", f"Successfully assigned {ns}/web to {node}"),
        ("Normal", "Pulling", 'Pulling image "nginx:1.27"'),
        ("Normal", "Pulled", None),
        ("Normal", "Created", "Created container: web"),
        ("Normal", "Started", "Started container web"),
    ]
    wait_for(lambda: len(seen(stack, ns, "web")) >= len(want), TIMEOUT, what="five Events")
    got = events(stack, ns, "web")
    assert [(e["type"], e["reason"]) for e in got] == [(t, r) for t, r, _ in want]
    for event, (_, _, message) in zip(got, want, strict=True):
        if message is not None:
            assert event["message"] == message
    assert re.fullmatch(
        r'Successfully pulled image "nginx:1\.27" in [0-9.]+m?s \([0-9.]+m?s including waiting\)\. '
        r"Image size: [0-9]+ bytes\.",
        got[2]["message"],
    ), got[2]["message"]
    scheduled, *kubelet = got
    assert scheduled["source"] == {"component": "default-scheduler"}
    assert scheduled["reportingComponent"] == "default-scheduler"
    for event in kubelet:
        assert event["source"] == {"component": "kubelet", "host": node}
        assert (event["reportingComponent"], event["reportingInstance"]) == ("kubelet", node)
        assert event["involvedObject"]["fieldPath"] == "spec.containers{web}"
    # `kubectl describe pod` lists them in that order, from the scheduler then the kubelet.
    rows = describe_events(stack, ns, "web")
    assert [(r[1], r[3]) for r in rows] == [
        ("Scheduled", "default-scheduler"),
        ("Pulling", "kubelet"),
        ("Pulled", "kubelet"),
        ("Created", "kubelet"),
        ("Started", "kubelet"),
    ]

    # A tagged image is pulled IfNotPresent: a second pod on that node finds it there.
    stack.kubectl("-n", ns, "run", "again", "--image=nginx:1.27", f"--overrides={json.dumps(on_node(node))}")
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/again", f"--timeout={TIMEOUT:.0f}s")
    wait_for(lambda: len(seen(stack, ns, "again")) >= 4, TIMEOUT, what="the second pod's Events")
    assert seen(stack, ns, "again")[1:] == [
        ("Normal", "Pulled", 'Container image "nginx:1.27" already present on machine'),
        ("Normal", "Created", "Created container: again"),
        ("Normal", "Started", "Started container again"),
    ]

    stack.kubectl("-n", ns, "delete", "pod", "web", "--wait=false")
    wait_for(
        lambda: ("Normal", "Killing", "Stopping container web") in seen(stack, ns, "web"),
        TIMEOUT,
        what="the Killing Event",
    )


def on_node(node: str) -> dict[str, Any]:
    return {"spec": {"nodeSelector": {"kubernetes.io/hostname": node}}}


def test_a_missing_image_backs_off_and_set_image_recovers(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("-n", ns, "run", "bad", "--image=nginx:404")
    wait_for(lambda: waiting_reason(stack, ns, "bad") == "ImagePullBackOff", TIMEOUT, what="ImagePullBackOff")
    pulled = (
        'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:404": '
    )
    wait_for(
        lambda: (
            {
                ("Warning", "Failed", "Error: ErrImagePull"),
                ("Normal", "BackOff", 'Back-off pulling image "nginx:404"'),
                ("Warning", "Failed", "Error: ImagePullBackOff"),
            }
            <= set(seen(stack, ns, "bad"))
        ),
        TIMEOUT,
        what="the pull failure Events",
    )
    failed = [m for t, r, m in seen(stack, ns, "bad") if r == "Failed" and m.startswith("Failed to pull")]
    assert failed and failed[0].startswith(f'Failed to pull image "nginx:404": {pulled}')
    row = stack.kubectl("-n", ns, "get", "pod", "bad", "--no-headers").stdout.split()
    assert row[2] in ("ErrImagePull", "ImagePullBackOff"), row
    # The back-off retries the pull, and each retry fails the same way.
    wait_for(
        lambda: sum(e["count"] for e in events(stack, ns, "bad") if e["reason"] == "Pulling") >= 2,
        TIMEOUT,
        what="a second pull",
    )

    stack.kubectl("-n", ns, "set", "image", "pod/bad", "bad=nginx:1.27")
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/bad", f"--timeout={TIMEOUT:.0f}s")
    status = get(stack, ns, "pod", "bad")["status"]["containerStatuses"][0]
    assert status["image"] == "nginx:1.27" and "running" in status["state"]
    assert ("Normal", "Pulling", 'Pulling image "nginx:1.27"') in seen(stack, ns, "bad")


def test_an_invalid_image_name_waits_for_a_fix(stack: devstack.DevStack, ns: str) -> None:
    # `kubectl run` checks the name itself; the API server does not.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "caps"}}
    pod["spec"] = {"containers": [{"name": "caps", "image": "Nginx:1.27"}]}
    stack.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(pod))
    wait_for(
        lambda: waiting_reason(stack, ns, "caps") == "InvalidImageName", TIMEOUT, what="InvalidImageName"
    )
    message = (
        'Failed to apply default image tag "Nginx:1.27": couldn\'t parse image name "Nginx:1.27": '
        "invalid reference format: repository name (library/Nginx) must be lowercase"
    )
    waiting = get(stack, ns, "pod", "caps")["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["message"] == message
    wait_for(
        lambda: (
            {("Warning", "InspectFailed", message), ("Warning", "Failed", "Error: InvalidImageName")}
            <= set(seen(stack, ns, "caps"))
        ),
        TIMEOUT,
        what="the InspectFailed Event",
    )
    stack.kubectl("-n", ns, "set", "image", "pod/caps", "caps=nginx:1.27")
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/caps", f"--timeout={TIMEOUT:.0f}s")


def test_the_deployment_pages_rollback_example(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#rolling-back-a-deployment"""
    deploy = "deployment/nginx-deployment"
    stack.kubectl(
        "-n", ns, "create", "deployment", "nginx-deployment", "--image=nginx:1.14.2", "--replicas=3"
    )
    stack.kubectl("-n", ns, "rollout", "status", deploy, f"--timeout={TIMEOUT:.0f}s")
    stack.kubectl("-n", ns, "set", "image", deploy, "nginx=nginx:1.161")
    # The rollout gets stuck: `rollout status` keeps waiting (here until its timeout).
    stuck = stack.kubectl("-n", ns, "rollout", "status", deploy, "--timeout=5s", check=False)
    assert stuck.returncode != 0
    assert 'Waiting for deployment "nginx-deployment" rollout to finish' in stuck.stdout
    wait_for(
        lambda: any(
            waiting_reason(stack, ns, p["metadata"]["name"]) in ("ErrImagePull", "ImagePullBackOff")
            for p in get(stack, ns, "pods")["items"]
            if p["spec"]["containers"][0]["image"] == "nginx:1.161"
        ),
        TIMEOUT,
        what="a new pod failing to pull nginx:1.161",
    )
    # The old pods keep serving: the rollout does not take more than maxUnavailable away.
    assert get(stack, ns, deploy)["status"].get("availableReplicas", 0) >= 2

    stack.kubectl("-n", ns, "rollout", "undo", deploy)
    stack.kubectl("-n", ns, "rollout", "status", deploy, f"--timeout={TIMEOUT:.0f}s")

    def only_the_old_image() -> bool:
        pods = get(stack, ns, "pods")["items"]
        return len(pods) == 3 and all(p["spec"]["containers"][0]["image"] == "nginx:1.14.2" for p in pods)

    wait_for(only_the_old_image, TIMEOUT, what="three nginx:1.14.2 pods and no other")


def container_status(stack: devstack.DevStack, ns: str, pod: str) -> Any:
    return (get(stack, ns, "pod", pod).get("status", {}).get("containerStatuses") or [{}])[0]


def test_a_crashing_container_backs_off_in_crash_loop_back_off(stack: devstack.DevStack, ns: str) -> None:
    crash = ["--annotations=sim.kcm.dev/exit-code=1", "--annotations=sim.kcm.dev/run-seconds=0.5"]
    stack.kubectl("-n", ns, "run", "crash", "--image=busybox:1.36", *crash)
    wait_for(
        lambda: waiting_reason(stack, ns, "crash") == "CrashLoopBackOff", TIMEOUT, what="CrashLoopBackOff"
    )
    pod = get(stack, ns, "pod", "crash")
    full = f"crash_{ns}({pod['metadata']['uid']})"
    status = pod["status"]["containerStatuses"][0]
    # The first restart is at once; the next ones back off 10 s doubling (a fifth of it here).
    assert re.fullmatch(
        rf"back-off [0-9]+s restarting failed container=crash pod={re.escape(full)}",
        status["state"]["waiting"]["message"],
    ), status
    assert status["restartCount"] >= 1 and not status["ready"]
    terminated = status["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")
    assert pod["status"]["phase"] == "Running"
    row = stack.kubectl("-n", ns, "get", "pod", "crash", "--no-headers").stdout.split()
    assert row[1:3] == ["0/1", "CrashLoopBackOff"], row
    wait_for(
        lambda: (
            ("Warning", "BackOff", f"Back-off restarting failed container crash in pod {full}")
            in seen(stack, ns, "crash")
        ),
        TIMEOUT,
        what="the BackOff Event",
    )
    backoff = next(e for e in events(stack, ns, "crash") if e["reason"] == "BackOff")
    assert backoff["source"]["component"] == "kubelet" and backoff["involvedObject"]["fieldPath"] == (
        "spec.containers{crash}"
    )
    # The back-off ends and the container runs again: RESTARTS grows.
    wait_for(
        lambda: container_status(stack, ns, "crash").get("restartCount", 0) >= 3, TIMEOUT, what="3 restarts"
    )


def test_set_image_on_a_running_pod_restarts_its_container(stack: devstack.DevStack, ns: str) -> None:
    stack.kubectl("-n", ns, "run", "web", "--image=nginx:1.27")
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/web", f"--timeout={TIMEOUT:.0f}s")
    stack.kubectl("-n", ns, "set", "image", "pod/web", "web=nginx:1.28")

    def restarted_with(image: str, count: int) -> bool:
        status = container_status(stack, ns, "web")
        return (
            status.get("image") == image
            and "running" in status.get("state", {})
            and status["restartCount"] == count
        )

    wait_for(lambda: restarted_with("nginx:1.28", 1), TIMEOUT, what="web restarted with nginx:1.28")
    # Killed promptly on SIGTERM: the run that ended exited 0.
    assert container_status(stack, ns, "web")["lastState"]["terminated"]["exitCode"] == 0
    wait_for(
        lambda: (
            {
                ("Normal", "Killing", "Container web definition changed, will be restarted"),
                ("Normal", "Pulling", 'Pulling image "nginx:1.28"'),
            }
            <= set(seen(stack, ns, "web"))
        ),
        TIMEOUT,
        what="the Killing and Pulling Events",
    )
    stack.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/web", f"--timeout={TIMEOUT:.0f}s")

    # A new image that cannot be pulled: the pod stays Running, its container waiting.
    stack.kubectl("-n", ns, "set", "image", "pod/web", "web=nginx:404")
    wait_for(
        lambda: waiting_reason(stack, ns, "web") in ("ErrImagePull", "ImagePullBackOff"),
        TIMEOUT,
        what="ErrImagePull",
    )
    pod = get(stack, ns, "pod", "web")
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 1
    # Back to an image the node has: no pull, a second restart.
    stack.kubectl("-n", ns, "set", "image", "pod/web", "web=nginx:1.27")
    wait_for(lambda: restarted_with("nginx:1.27", 2), TIMEOUT, what="web restarted with nginx:1.27")


TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME = {
    "defaultMode": 420,
    "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {
            "downwardAPI": {
                "items": [
                    {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}
                ]
            }
        },
    ],
}


def admitted(stack: devstack.DevStack, ns: str, **spec: Any) -> Any:
    """The pod spec the API server's admission makes of `spec` (a server-side dry run)."""
    containers = [{"name": "app", "image": "nginx:1.27"}, {"name": "own", "image": "nginx:1.27"}]
    containers[1]["volumeMounts"] = [{"name": "mine", "mountPath": TOKEN_PATH}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sa"}}
    pod["spec"] = {
        "initContainers": [{"name": "setup", "image": "busybox"}],
        "containers": containers,
        "volumes": [{"name": "mine", "emptyDir": {}}],
        **spec,
    }
    out = stack.kubectl(
        "-n", ns, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod)
    )
    return json.loads(out.stdout)["spec"]


def token_mounts(spec: Any) -> dict[str, list[Any]]:
    return {
        c["name"]: [m for m in c.get("volumeMounts") or [] if m["mountPath"] == TOKEN_PATH]
        for c in spec.get("initContainers", []) + spec["containers"]
    }


def test_service_account_admission_as_kube_apiserver_does_it(stack: devstack.DevStack, ns: str) -> None:
    """The same on both servers (the module runs on kube-apiserver too)."""
    spec = admitted(stack, ns)
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    token = [v for v in spec["volumes"] if v["name"] != "mine"]
    assert len(token) == 1 and re.fullmatch(
        r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", token[0]["name"]
    )
    assert token[0]["projected"] == TOKEN_VOLUME
    mount = {"name": token[0]["name"], "readOnly": True, "mountPath": TOKEN_PATH}
    # Every container gets it, save one that mounts something of its own there.
    assert token_mounts(spec) == {
        "setup": [mount],
        "app": [mount],
        "own": [{"name": "mine", "mountPath": TOKEN_PATH}],
    }

    # The pod's `automountServiceAccountToken: false` wins; so does its ServiceAccount's.
    assert [v["name"] for v in admitted(stack, ns, automountServiceAccountToken=False)["volumes"]] == ["mine"]
    stack.kubectl("-n", ns, "create", "serviceaccount", "robot")
    patch = {"automountServiceAccountToken": False, "imagePullSecrets": [{"name": "regcred"}]}
    stack.kubectl("-n", ns, "patch", "serviceaccount", "robot", "-p", json.dumps(patch))
    robot = admitted(stack, ns, serviceAccountName="robot")
    assert [v["name"] for v in robot["volumes"]] == ["mine"]
    assert robot["imagePullSecrets"] == [{"name": "regcred"}]  # the ServiceAccount's, as the pod has none
    robot = admitted(stack, ns, serviceAccountName="robot", automountServiceAccountToken=True)
    assert len(robot["volumes"]) == 2


def test_a_pod_of_a_missing_service_account_is_refused(stack: devstack.DevStack, ns: str) -> None:
    """kube-apiserver's message on both servers, for a pod and for a ReplicaSet's (generateName)."""
    ghost = {"spec": {"serviceAccountName": "ghost"}}
    refused = stack.kubectl(
        "-n", ns, "run", "haunted", "--image=nginx:1.27", "--overrides", json.dumps(ghost), check=False
    )
    why = f'error looking up service account {ns}/ghost: serviceaccount "ghost" not found'
    assert refused.returncode != 0
    assert refused.stderr.strip() == f'Error from server (Forbidden): pods "haunted" is forbidden: {why}'

    stack.kubectl("-n", ns, "create", "deployment", "ghosts", "--image=nginx:1.27")
    stack.kubectl("-n", ns, "patch", "deployment", "ghosts", "-p", json.dumps({"spec": {"template": ghost}}))
    failed = re.compile(rf'Error creating: pods "ghosts-[a-z0-9]+-" is forbidden: {re.escape(why)}')

    def failed_create() -> bool:
        items = get(stack, ns, "events", "--field-selector", "reason=FailedCreate")["items"]
        return any(failed.fullmatch(e["message"]) for e in items)

    wait_for(failed_create, TIMEOUT, what="the ReplicaSet's FailedCreate Event")
    # Once the account exists the ReplicaSet's retries go through.
    stack.kubectl("-n", ns, "create", "serviceaccount", "ghost")
    stack.kubectl("-n", ns, "rollout", "status", "deployment/ghosts", f"--timeout={TIMEOUT:.0f}s")


def test_a_limit_range_defaults_and_bounds_pods_and_claims(stack: devstack.DevStack, ns: str) -> None:
    """LimitRanger, the same on both servers: kubectl's view of defaults and refusals."""
    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "bounds"},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {"cpu": "1"},
                    "default": {"cpu": "500m"},
                    "defaultRequest": {"cpu": "250m"},
                },
                {"type": "PersistentVolumeClaim", "max": {"storage": "5Gi"}},
            ]
        },
    }
    stack.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(limits))
    stack.kubectl("-n", ns, "run", "plain", "--image=nginx:1.27")
    pod = get(stack, ns, "pod", "plain")
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m"},
        "requests": {"cpu": "250m"},
    }
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container plain; cpu limit for container plain"
    )
    big = json.dumps(
        {
            "spec": {
                "containers": [{"name": "big", "image": "nginx:1.27", "resources": {"limits": {"cpu": "2"}}}]
            }
        }
    )
    refused = stack.kubectl("-n", ns, "run", "big", "--image=nginx:1.27", "--overrides", big, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    )
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "huge"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }
    refused = stack.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(claim), check=False)
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": persistentvolumeclaims "huge" is forbidden: '
        "maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
    )
    # The LimitRange's own validation: kube-apiserver's message.
    bad = {
        **limits,
        "metadata": {"name": "bad"},
        "spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]},
    }
    refused = stack.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(bad), check=False)
    assert "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'" in refused.stderr
