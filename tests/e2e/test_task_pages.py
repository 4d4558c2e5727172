"""The official Kubernetes task pages, step by step with kubectl, on a `kcm dev` stack (issue 34).

Each test follows one page of kubernetes.io (named in its docstring) with the kubectl commands
and manifests the page uses, adapted only where a wait or the namespace needs it, and compares
what the page shows: `kubectl get`'s columns, `rollout status` lines, Events' reasons and
messages. Where the page was written against an older kubectl (its wording, its columns), the
test expects what kubectl v1.32 prints against kube-apiserver v1.32, which is what the embedded
API server answers too. What a simulated cluster cannot show (a real image's output, metrics-server's
timing) is listed in docs/simulator.md, "What a simulated cluster cannot show".

One full stack for the module (every default controller, three simulated nodes), a namespace
per test; the HPA's sync period and downscale window are shortened (upstream's flags), image pull
back-off scaled down. The CronJob page's `* * * * *` CronJob is created when the module starts and
checked by the last test, after a real minute boundary has passed. The pages' load, a drain and
a rollout take seconds because simulated containers stop promptly on SIGTERM.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.background import Background
from tests.conftest import KUBECTL, wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture(
    "--horizontal-pod-autoscaler-sync-period=1s",
    "--horizontal-pod-autoscaler-downscale-stabilization=3s",
    "--sim-backoff-scale",
    "0.2",
)
_counter = iter(range(1000))
TIMEOUT = 60.0
WAIT = f"--timeout={TIMEOUT:.0f}s"


@pytest.fixture
def ns(stack: devstack.DevStack) -> Iterator[str]:
    name = f"pages-{next(_counter)}"
    stack.create_namespace(name, TIMEOUT)
    yield name
    # Not waited for: the next test need not wait, but its drain need not evict these either.
    stack.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def get(stack: devstack.DevStack, ns: str, *what: str) -> Any:
    return json.loads(stack.kubectl("-n", ns, "get", *what, "-o", "json").stdout)


def table(stack: devstack.DevStack, ns: str, *what: str) -> list[dict[str, str]]:
    """`kubectl get` as a user reads it: one dict per row, keyed by the column headers."""
    lines = stack.kubectl("-n", ns, "get", *what).stdout.splitlines()
    if not lines:
        return []
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def headers(stack: devstack.DevStack, ns: str, *what: str) -> list[str]:
    out = stack.kubectl("-n", ns, "get", *what).stdout.splitlines()
    return re.split(r"\s{2,}", out[0].strip()) if out else []


def assert_columns(shown: list[str], page: list[str]) -> None:
    """The page's columns, in its order; kubectl v1.32 may add newer ones between them."""
    it = iter(shown)
    assert all(column in it for column in page), f"{shown} lacks the page's {page}"


def events(stack: devstack.DevStack, ns: str, name: str) -> list[tuple[str, str, str]]:
    """(reason, source component, message) of the Events about `name`, in no particular order
    (their times are whole seconds: a rollout's steps share one)."""
    items = get(stack, ns, "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [(e["reason"], (e.get("source") or {}).get("component", ""), e["message"]) for e in items]


# https://k8s.io/examples/application/job/cronjob.yaml
CRONJOB = """
apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.28
            imagePullPolicy: IfNotPresent
            command:
            - /bin/sh
            - -c
            - date; echo Hello from the Kubernetes cluster
          restartPolicy: OnFailure
"""
CRONJOB_NS = "pages-cronjob"


@pytest.fixture(scope="module", autouse=True)
def hello(stack: devstack.DevStack) -> str:
    """The CronJob page's first steps, when the module starts: the last test sees it fire."""
    stack.kubectl("create", "namespace", CRONJOB_NS)
    wait_for(
        lambda: stack.kubectl("-n", CRONJOB_NS, "get", "sa", "default", check=False).returncode == 0,
        TIMEOUT,
        what="the default ServiceAccount",
    )
    out = stack.kubectl("-n", CRONJOB_NS, "create", "-f", "-", input=CRONJOB).stdout
    assert out.strip() == "cronjob.batch/hello created"
    [row] = table(stack, CRONJOB_NS, "cronjob", "hello")
    assert_columns(list(row), ["NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"])
    assert (row["SCHEDULE"], row["SUSPEND"], row["ACTIVE"], row["LAST SCHEDULE"]) == (
        "* * * * *",
        "False",
        "0",
        "<none>",
    )
    return CRONJOB_NS


# https://k8s.io/examples/controllers/nginx-deployment.yaml
NGINX_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.14.2
        ports:
        - containerPort: 80
"""
DEPLOY = "deployment/nginx-deployment"


def rollout_status(stack: devstack.DevStack, ns: str, what: str) -> list[str]:
    return stack.kubectl("-n", ns, "rollout", "status", what, WAIT).stdout.splitlines()


def replicasets(stack: devstack.DevStack, ns: str) -> dict[str, tuple[str, str, str]]:
    """`kubectl get rs`: name -> (DESIRED, CURRENT, READY)."""
    return {r["NAME"]: (r["DESIRED"], r["CURRENT"], r["READY"]) for r in table(stack, ns, "rs")}


def scaling_events(stack: devstack.DevStack, ns: str) -> list[str]:
    return [m for reason, src, m in events(stack, ns, "nginx-deployment") if reason == "ScalingReplicaSet"]


def test_deployment_page(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/deployment/: create, rollout
    status, update the image, a mistyped image stuck in ImagePullBackOff, history, undo, scale."""
    out = stack.kubectl("-n", ns, "apply", "-f", "-", input=NGINX_DEPLOYMENT).stdout
    assert out.strip() == "deployment.apps/nginx-deployment created"
    assert_columns(headers(stack, ns, "deployments"), ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"])
    status = rollout_status(stack, ns, DEPLOY)
    assert status[-1] == 'deployment "nginx-deployment" successfully rolled out'
    for line in status[:-1]:
        assert re.fullmatch(r'Waiting for deployment "nginx-deployment" rollout to finish: .*\.\.\.', line)
    [row] = table(stack, ns, "deployments")
    assert (row["NAME"], row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == (
        "nginx-deployment",
        "3/3",
        "3",
        "3",
    )

    # The ReplicaSet is [DEPLOYMENT-NAME]-[HASH], the hash its pods' pod-template-hash label.
    assert_columns(headers(stack, ns, "rs"), ["NAME", "DESIRED", "CURRENT", "READY", "AGE"])
    [(first, counts)] = replicasets(stack, ns).items()
    assert counts == ("3", "3", "3")
    template_hash = first.removeprefix("nginx-deployment-")
    pods = table(stack, ns, "pods", "--show-labels")
    assert_columns(list(pods[0]), ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"])
    assert len(pods) == 3
    for pod in pods:
        assert pod["NAME"].startswith(f"{first}-")
        assert (pod["READY"], pod["STATUS"], pod["RESTARTS"]) == ("1/1", "Running", "0")
        assert pod["LABELS"] == f"app=nginx,pod-template-hash={template_hash}"

    # Updating the Deployment: a second ReplicaSet scaled up as the first is scaled down.
    out = stack.kubectl(
        "-n", ns, "set", "image", "deployment.v1.apps/nginx-deployment", "nginx=nginx:1.16.1"
    ).stdout
    assert out.strip() == "deployment.apps/nginx-deployment image updated"
    assert rollout_status(stack, ns, DEPLOY)[-1] == 'deployment "nginx-deployment" successfully rolled out'
    [second] = [name for name in replicasets(stack, ns) if name != first]
    wait_for(
        lambda: replicasets(stack, ns) == {first: ("0", "0", "0"), second: ("3", "3", "3")},
        TIMEOUT,
        what="the old ReplicaSet scaled to 0, the new one to 3",
    )
    wait_for(lambda: len(table(stack, ns, "pods")) == 3, TIMEOUT, what="only the new pods")
    assert all(p["NAME"].startswith(f"{second}-") for p in table(stack, ns, "pods"))
    describe = stack.kubectl("-n", ns, "describe", "deployments").stdout
    assert re.search(
        r"Replicas:\s+3 desired \| 3 updated \| 3 total \| 3 available \| 0 unavailable", describe
    )
    assert re.search(r"RollingUpdateStrategy:\s+25% max unavailable, 25% max surge", describe)
    assert re.search(r"Available\s+True\s+MinimumReplicasAvailable", describe)
    assert re.search(r"Progressing\s+True\s+NewReplicaSetAvailable", describe)
    assert f"NewReplicaSet:   {second} (3/3 replicas created)" in describe
    # The page's steps: up to 3, the new set up to 1 (25% max surge) while the old one keeps 3.
    scaled = scaling_events(stack, ns)
    assert f"Scaled up replica set {first} from 0 to 3" in scaled
    assert f"Scaled up replica set {second} from 0 to 1" in scaled
    assert any(re.fullmatch(rf"Scaled down replica set {first} from \d to 0", m) for m in scaled), scaled

    # Rolling back: a typo in the image stalls the rollout with one new pod that cannot pull.
    stack.kubectl("-n", ns, "set", "image", DEPLOY, "nginx=nginx:1.161")
    stuck = stack.kubectl("-n", ns, "rollout", "status", DEPLOY, "--timeout=3s", check=False)
    assert stuck.returncode != 0
    assert (
        'Waiting for deployment "nginx-deployment" rollout to finish: 1 out of 3 new replicas have been updated...'
        in stuck.stdout
    )
    [third] = [name for name in replicasets(stack, ns) if name not in (first, second)]
    wait_for(
        lambda: any(
            p["STATUS"] == "ImagePullBackOff" and p["NAME"].startswith(third)
            for p in table(stack, ns, "pods")
        ),
        TIMEOUT,
        what="the new pod in ImagePullBackOff",
    )
    assert replicasets(stack, ns) == {first: ("0", "0", "0"), second: ("3", "3", "3"), third: ("1", "1", "0")}
    describe = stack.kubectl("-n", ns, "describe", "deployment").stdout
    assert re.search(
        r"Replicas:\s+3 desired \| 1 updated \| 4 total \| 3 available \| 1 unavailable", describe
    )
    assert re.search(r"Progressing\s+True\s+ReplicaSetUpdated", describe)

    history = stack.kubectl("-n", ns, "rollout", "history", DEPLOY).stdout.splitlines()
    assert history[0].strip() == "deployment.apps/nginx-deployment"
    assert re.split(r"\s+", history[1].strip()) == ["REVISION", "CHANGE-CAUSE"]
    assert [re.split(r"\s+", line.strip()) for line in history[2:] if line.strip()] == [
        ["1", "<none>"],
        ["2", "<none>"],
        ["3", "<none>"],
    ]
    revision = stack.kubectl("-n", ns, "rollout", "history", DEPLOY, "--revision=2").stdout
    assert revision.startswith("deployment.apps/nginx-deployment with revision #2\n")
    assert re.search(r"Image:\s+nginx:1.16.1", revision)
    assert f"pod-template-hash={second.removeprefix('nginx-deployment-')}" in revision

    out = stack.kubectl("-n", ns, "rollout", "undo", DEPLOY).stdout
    assert out.strip() == "deployment.apps/nginx-deployment rolled back"
    assert rollout_status(stack, ns, DEPLOY)[-1] == 'deployment "nginx-deployment" successfully rolled out'
    [row] = table(stack, ns, "deployment", "nginx-deployment")
    assert (row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == ("3/3", "3", "3")
    describe = stack.kubectl("-n", ns, "describe", "deployment", "nginx-deployment").stdout
    assert re.search(r"deployment.kubernetes.io/revision: 4", describe)
    assert re.search(r"Image:\s+nginx:1.16.1", describe)
    assert f"Scaled down replica set {third} from 1 to 0" in scaling_events(stack, ns)

    out = stack.kubectl("-n", ns, "scale", DEPLOY, "--replicas=10").stdout
    assert out.strip() == "deployment.apps/nginx-deployment scaled"
    assert rollout_status(stack, ns, DEPLOY)[-1] == 'deployment "nginx-deployment" successfully rolled out'
    [row] = table(stack, ns, "deployment", "nginx-deployment")
    assert (row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == ("10/10", "10", "10")

    # Proportional scaling: maxSurge 3, maxUnavailable 2, an image that cannot be resolved; the
    # rollout stops at 5 new pods beside 8 old ones, and 5 more replicas are shared 3 to 2.
    strategy = {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}}}
    stack.kubectl("-n", ns, "patch", DEPLOY, "-p", json.dumps(strategy))
    stack.kubectl("-n", ns, "set", "image", DEPLOY, "nginx=nginx:sometag")
    [fourth] = wait_for(
        lambda: [name for name in replicasets(stack, ns) if name not in (first, second, third)], TIMEOUT
    )
    wait_for(
        lambda: (
            {k: v for k, v in replicasets(stack, ns).items() if v[0] != "0"}
            == {fourth: ("5", "5", "0"), second: ("8", "8", "8")}
        ),
        TIMEOUT,
        what="5 new pods that cannot pull beside 8 old ones",
    )
    stack.kubectl("-n", ns, "scale", DEPLOY, "--replicas=15")
    wait_for(
        lambda: (
            {k: v for k, v in replicasets(stack, ns).items() if v[0] != "0"}
            == {fourth: ("7", "7", "0"), second: ("11", "11", "11")}
        ),
        TIMEOUT,
        what="3 of the 5 new replicas to the old ReplicaSet, 2 to the new",
    )
    [row] = table(stack, ns, "deploy")
    assert (row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == ("11/15", "7", "11")


def test_deployment_page_pause_and_resume(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#pausing-and-resuming-a-deployment"""
    stack.kubectl("-n", ns, "apply", "-f", "-", input=NGINX_DEPLOYMENT)
    rollout_status(stack, ns, DEPLOY)
    [(first, counts)] = replicasets(stack, ns).items()
    assert counts == ("3", "3", "3")

    assert (
        stack.kubectl("-n", ns, "rollout", "pause", DEPLOY).stdout.strip()
        == "deployment.apps/nginx-deployment paused"
    )
    stack.kubectl("-n", ns, "set", "image", DEPLOY, "nginx=nginx:1.16.1")
    # No new rollout started: one revision, the same ReplicaSet.
    history = stack.kubectl("-n", ns, "rollout", "history", DEPLOY).stdout.split()
    assert history == ["deployment.apps/nginx-deployment", "REVISION", "CHANGE-CAUSE", "1", "<none>"]
    out = stack.kubectl(
        "-n", ns, "set", "resources", DEPLOY, "-c=nginx", "--limits=cpu=200m,memory=512Mi"
    ).stdout
    assert out.strip() == "deployment.apps/nginx-deployment resource requirements updated"
    assert replicasets(stack, ns) == {first: ("3", "3", "3")}
    paused = stack.kubectl("-n", ns, "describe", "deployment", "nginx-deployment").stdout
    assert re.search(r"Progressing\s+Unknown\s+DeploymentPaused", paused)

    assert (
        stack.kubectl("-n", ns, "rollout", "resume", DEPLOY).stdout.strip()
        == "deployment.apps/nginx-deployment resumed"
    )
    assert rollout_status(stack, ns, DEPLOY)[-1] == 'deployment "nginx-deployment" successfully rolled out'
    [second] = [name for name in replicasets(stack, ns) if name != first]
    wait_for(
        lambda: replicasets(stack, ns) == {first: ("0", "0", "0"), second: ("3", "3", "3")},
        TIMEOUT,
        what="the new ReplicaSet with all the updates",
    )
    template = get(stack, ns, "rs", second)["spec"]["template"]["spec"]["containers"][0]
    assert (template["image"], template["resources"]["limits"]) == (
        "nginx:1.16.1",
        {"cpu": "200m", "memory": "512Mi"},
    )


# https://kubernetes.io/examples/controllers/job.yaml
PI_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  template:
    spec:
      containers:
      - name: pi
        image: perl:5.34.0
        command: ["perl",  "-Mbignum=bpi", "-wle", "print bpi(2000)"]
      restartPolicy: Never
  backoffLimit: 4
"""


def test_job_page(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#running-an-example-job"""
    out = stack.kubectl("-n", ns, "apply", "-f", "-", input=PI_JOB).stdout
    assert out.strip() == "job.batch/pi created"
    wait = stack.kubectl("-n", ns, "wait", "--for=condition=complete", "job/pi", WAIT).stdout
    assert wait.strip() == "job.batch/pi condition met"

    describe = stack.kubectl("-n", ns, "describe", "job", "pi").stdout
    assert re.search(r"Parallelism:\s+1\nCompletions:\s+1\n", describe)
    assert re.search(r"Pods Statuses:\s+0 Active \(0 Ready\) / 1 Succeeded / 0 Failed", describe)
    assert re.search(r"Completed At:\s+\S", describe)
    pods = stack.kubectl(
        "-n", ns, "get", "pods", "--selector=job-name=pi", "--output=jsonpath={.items[*].metadata.name}"
    ).stdout.split()
    assert len(pods) == 1 and re.fullmatch(r"pi-[a-z0-9]{5}", pods[0])
    assert ("SuccessfulCreate", "job-controller", f"Created pod: {pods[0]}") in events(stack, ns, "pi")
    assert ("Completed", "job-controller", "Job completed") in events(stack, ns, "pi")
    [row] = table(stack, ns, "jobs")
    assert_columns(list(row), ["NAME", "COMPLETIONS", "DURATION", "AGE"])
    assert (row["NAME"], row["COMPLETIONS"]) == ("pi", "1/1")
    # The logs say what ran; a simulated perl prints no digits of pi.
    logs = stack.kubectl("-n", ns, "logs", pods[0]).stdout
    assert "$ perl -Mbignum=bpi -wle 'print bpi(2000)'" in logs
    assert "exited with code 0 (Completed)" in logs


ZOOKEEPER = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: zk
spec:
  replicas: 3
  selector:
    matchLabels:
      app: zookeeper
  template:
    metadata:
      labels:
        app: zookeeper
    spec:
      containers:
      - name: kubernetes-zookeeper
        image: registry.k8s.io/kubernetes-zookeeper:1.0-3.4.10
"""
# https://k8s.io/examples/policy/zookeeper-pod-disruption-budget-{minavailable,maxunavailable}.yaml,
# the first with the page's "minAvailable equal to the number of replicas": zero voluntary evictions.
PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: zk-pdb
spec:
  {field}: {value}
  selector:
    matchLabels:
      app: zookeeper
"""


def test_pdb_and_drain_pages(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/tasks/run-application/configure-pdb/ and
    https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/: a budget that allows no
    voluntary eviction keeps `kubectl drain` retrying; once it allows one, the drain completes."""
    stack.kubectl("-n", ns, "apply", "-f", "-", input=ZOOKEEPER)
    stack.kubectl("-n", ns, "rollout", "status", "deployment/zk", WAIT)
    stack.kubectl("-n", ns, "apply", "-f", "-", input=PDB.format(field="minAvailable", value=3))
    assert_columns(
        headers(stack, ns, "poddisruptionbudgets"),
        ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
    )

    def pdb_row() -> tuple[str, str, str]:
        [row] = table(stack, ns, "poddisruptionbudgets")
        return row["MIN AVAILABLE"], row["MAX UNAVAILABLE"], row["ALLOWED DISRUPTIONS"]

    wait_for(
        lambda: get(stack, ns, "pdb", "zk-pdb").get("status", {}).get("observedGeneration") == 1, TIMEOUT
    )
    assert pdb_row() == ("3", "N/A", "0")
    status = get(stack, ns, "pdb", "zk-pdb")["status"]
    assert (
        status["currentHealthy"],
        status["desiredHealthy"],
        status["disruptionsAllowed"],
        status["expectedPods"],
    ) == (3, 3, 0, 3)

    node = get(stack, ns, "pods", "-l", "app=zookeeper")["items"][0]["spec"]["nodeName"]
    assert node in [n["NAME"] for n in table(stack, ns, "nodes")]
    drain = Background([KUBECTL, "--kubeconfig", str(stack.kubeconfig), "drain", "--ignore-daemonsets", node])
    try:
        drain.wait_for_match(rf"node/{node} cordoned", TIMEOUT)
        refused = drain.wait_for_match(
            rf'error when evicting pods/"(zk-[a-z0-9-]+)" -n "{ns}" \(will retry after 5s\): '
            r"Cannot evict pod as it would violate the pod's disruption budget.",
            TIMEOUT,
        )
        assert get(stack, "default", "node", node)["spec"]["unschedulable"] is True
        assert drain.proc.poll() is None  # the drain keeps retrying

        stack.kubectl("-n", ns, "apply", "-f", "-", input=PDB.format(field="maxUnavailable", value=1))
        code = drain.exit_code(TIMEOUT)
        out = drain.output()
        assert code == 0, out
        assert f"pod/{refused.group(1)} evicted" in out
        assert out.splitlines()[-1] == f"node/{node} drained"
        # The Deployment replaced what was evicted on the other nodes.
        stack.kubectl("-n", ns, "rollout", "status", "deployment/zk", WAIT)
        pods = get(stack, ns, "pods", "-l", "app=zookeeper")["items"]
        assert all(p["spec"]["nodeName"] != node for p in pods if not p["metadata"].get("deletionTimestamp"))
        wait_for(lambda: pdb_row() == ("N/A", "1", "1"), TIMEOUT, what="one disruption allowed")
    finally:
        drain.stop()
        out = stack.kubectl("uncordon", node).stdout
    assert out.strip() == f"node/{node} uncordoned"


# https://k8s.io/examples/application/php-apache.yaml
PHP_APACHE = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: php-apache
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: php-apache
  template:
    metadata:
      labels:
        app.kubernetes.io/name: php-apache
    spec:
      containers:
      - name: php-apache
        image: registry.k8s.io/hpa-example
        ports:
        - containerPort: 80
        resources:
          limits:
            cpu: 500m
          requests:
            cpu: 200m
---
apiVersion: v1
kind: Service
metadata:
  name: php-apache
  labels:
    app.kubernetes.io/name: php-apache
spec:
  ports:
  - port: 80
  selector:
    app.kubernetes.io/name: php-apache
"""
CPU_USAGE = "sim.kcm.dev/cpu-usage"


def test_hpa_walkthrough(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale-walkthrough/

    The load generator's queries are played by the simulator's usage annotation: 610m on the one
    pod is the page's 305% of its 200m request; idle pods report 0."""
    out = stack.kubectl("-n", ns, "apply", "-f", "-", input=PHP_APACHE).stdout
    assert out.splitlines() == ["deployment.apps/php-apache created", "service/php-apache created"]
    stack.kubectl("-n", ns, "rollout", "status", "deployment/php-apache", WAIT)
    out = stack.kubectl(
        "-n", ns, "autoscale", "deployment", "php-apache", "--cpu-percent=50", "--min=1", "--max=10"
    ).stdout
    assert out.strip() == "horizontalpodautoscaler.autoscaling/php-apache autoscaled"
    assert_columns(
        headers(stack, ns, "hpa"), ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    )

    def hpa() -> tuple[str, str, str, str, str]:
        [row] = table(stack, ns, "hpa")
        return row["REFERENCE"], row["TARGETS"], row["MINPODS"], row["MAXPODS"], row["REPLICAS"]

    wait_for(
        lambda: hpa() == ("Deployment/php-apache", "cpu: 0%/50%", "1", "10", "1"), TIMEOUT, what="0%/50%"
    )

    # Increase load.
    stack.kubectl(
        "-n",
        ns,
        "annotate",
        "--overwrite",
        "pods",
        "-l",
        "app.kubernetes.io/name=php-apache",
        f"{CPU_USAGE}=610m",
    )
    wait_for(lambda: hpa()[1] == "cpu: 305%/50%", TIMEOUT, what="305%/50%")
    # Without `behavior` (kubectl autoscale sets none) a scale-up is limited to max(2x, 4) pods:
    # 4 first, then the page's 7.
    wait_for(lambda: hpa()[4] == "7", TIMEOUT, interval=0.5, what="7 replicas")
    stack.kubectl("-n", ns, "rollout", "status", "deployment/php-apache", WAIT)
    [row] = table(stack, ns, "deployment", "php-apache")
    assert (row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == ("7/7", "7", "7")
    rescaled = [m for reason, _, m in events(stack, ns, "php-apache") if reason == "SuccessfulRescale"]
    above = "reason: cpu resource utilization (percentage of request) above target"
    assert rescaled == [f"New size: 4; {above}", f"New size: 7; {above}"], "\n".join(
        map(str, events(stack, ns, "php-apache"))
    )

    # Stop load.
    stack.kubectl(
        "-n",
        ns,
        "annotate",
        "--overwrite",
        "pods",
        "-l",
        "app.kubernetes.io/name=php-apache",
        f"{CPU_USAGE}=0",
    )
    wait_for(lambda: hpa()[1:] == ("cpu: 0%/50%", "1", "10", "1"), TIMEOUT, what="back to 1 replica")
    stack.kubectl("-n", ns, "rollout", "status", "deployment/php-apache", WAIT)
    [row] = table(stack, ns, "deployment", "php-apache")
    assert (row["READY"], row["UP-TO-DATE"], row["AVAILABLE"]) == ("1/1", "1", "1")


def fluentd(version: str, resources: bool, ns: str) -> str:
    """https://k8s.io/examples/controllers/fluentd-daemonset.yaml and fluentd-daemonset-update.yaml
    (the update adds resources), in the test's namespace rather than kube-system."""
    limits = (
        """
        resources:
          limits:
            memory: 200Mi
          requests:
            cpu: 100m
            memory: 200Mi"""
        if resources
        else ""
    )
    return f"""
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  namespace: {ns}
  labels:
    k8s-app: fluentd-logging
spec:
  selector:
    matchLabels:
      name: fluentd-elasticsearch
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        name: fluentd-elasticsearch
    spec:
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      - key: node-role.kubernetes.io/master
        operator: Exists
        effect: NoSchedule
      containers:
      - name: fluentd-elasticsearch
        image: quay.io/fluentd_elasticsearch/fluentd:{version}{limits}
        volumeMounts:
        - name: varlog
          mountPath: /var/log
        - name: varlibdockercontainers
          mountPath: /var/lib/docker/containers
          readOnly: true
      terminationGracePeriodSeconds: 30
      volumes:
      - name: varlog
        hostPath:
          path: /var/log
      - name: varlibdockercontainers
        hostPath:
          path: /var/lib/docker/containers
"""


def test_daemonset_rolling_update_page(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/"""
    ds = "ds/fluentd-elasticsearch"
    template = '--output=go-template={{.spec.updateStrategy.type}}{{"\\n"}}'
    dry = stack.kubectl("apply", "-f", "-", "--dry-run=client", template, input=fluentd("v2.5.2", False, ns))
    assert dry.stdout == "RollingUpdate\n"
    out = stack.kubectl("create", "-f", "-", input=fluentd("v2.5.2", False, ns)).stdout
    assert out.strip() == "daemonset.apps/fluentd-elasticsearch created"
    assert stack.kubectl("-n", ns, "get", ds, template).stdout == "RollingUpdate\n"
    done = 'daemon set "fluentd-elasticsearch" successfully rolled out'
    assert rollout_status(stack, ns, ds)[-1] == done
    nodes = len(table(stack, ns, "nodes"))
    [row] = table(stack, ns, "ds")
    assert_columns(
        list(row), ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"]
    )
    assert [row[c] for c in ("DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE")] == [str(nodes)] * 5

    # Declarative: apply the updated manifest; the rollout replaces one pod at a time.
    stack.kubectl("apply", "-f", "-", input=fluentd("v2.5.2", True, ns))
    assert rollout_status(stack, ns, ds)[-1] == done
    # Imperative: only the image.
    image = "fluentd-elasticsearch=quay.io/fluentd_elasticsearch/fluentd:v2.6.0"
    out = stack.kubectl("-n", ns, "set", "image", ds, image).stdout
    assert out.strip() == "daemonset.apps/fluentd-elasticsearch image updated"
    status = rollout_status(stack, ns, ds)
    assert status[-1] == done
    for line in status[:-1]:
        assert re.fullmatch(
            r'Waiting for daemon set "fluentd-elasticsearch" rollout to finish: .*\.\.\.', line
        )
    pods = get(stack, ns, "pods", "-l", "name=fluentd-elasticsearch")["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == nodes and len({p["spec"]["nodeName"] for p in live}) == nodes
    assert {p["spec"]["containers"][0]["image"] for p in live} == {
        "quay.io/fluentd_elasticsearch/fluentd:v2.6.0"
    }
    out = stack.kubectl("-n", ns, "delete", "ds", "fluentd-elasticsearch").stdout
    assert out.strip() == 'daemonset.apps "fluentd-elasticsearch" deleted'


# https://k8s.io/examples/admin/resource/quota-pod.yaml and quota-pod-deployment.yaml
QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata:
  name: pod-demo
spec:
  hard:
    pods: "2"
"""
QUOTA_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pod-quota-demo
spec:
  selector:
    matchLabels:
      purpose: quota-demo
  replicas: 3
  template:
    metadata:
      labels:
        purpose: quota-demo
    spec:
      containers:
      - name: pod-quota-demo
        image: nginx
"""


def test_pod_quota_page(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/tasks/administer-cluster/manage-resources/quota-pod-namespace/"""
    stack.kubectl("apply", "-f", "-", f"--namespace={ns}", input=QUOTA)
    wait_for(lambda: get(stack, ns, "resourcequota", "pod-demo").get("status", {}).get("used"), TIMEOUT)
    quota = get(stack, ns, "resourcequota", "pod-demo")
    assert (quota["spec"]["hard"], quota["status"]["hard"], quota["status"]["used"]) == (
        {"pods": "2"},
        {"pods": "2"},
        {"pods": "0"},
    )
    stack.kubectl("apply", "-f", "-", f"--namespace={ns}", input=QUOTA_DEPLOYMENT)

    def failure() -> dict[str, Any]:
        conditions = get(stack, ns, "deployment", "pod-quota-demo").get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "ReplicaFailure"), {})

    condition = wait_for(failure, TIMEOUT, what="the ReplicaFailure condition")
    assert condition["reason"] == "FailedCreate"
    assert re.fullmatch(
        # The page's older server named the pod by its generateName; v1.32 generates the name first.
        r'pods "pod-quota-demo-[a-z0-9]+-[a-z0-9]{5}" is forbidden: exceeded quota: pod-demo, '
        r"requested: pods=1, used: pods=2, limited: pods=2",
        condition["message"],
    ), condition["message"]
    wait_for(
        lambda: get(stack, ns, "deployment", "pod-quota-demo")["status"].get("availableReplicas") == 2,
        TIMEOUT,
        what="two pods available",
    )
    deployment = get(stack, ns, "deployment", "pod-quota-demo")
    assert deployment["spec"]["replicas"] == 3
    assert get(stack, ns, "resourcequota", "pod-demo")["status"]["used"] == {"pods": "2"}
    out = stack.kubectl("delete", "namespace", ns, "--wait=false").stdout
    assert out.strip() == f'namespace "{ns}" deleted'


# https://k8s.io/examples/application/deployment.yaml (run-stateless-application-deployment)
SAMPLE_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
spec:
  selector:
    matchLabels:
      app: nginx
  replicas: 2
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.14.2
        ports:
        - containerPort: 80
"""


def test_cascading_deletion_page(stack: devstack.DevStack, ns: str) -> None:
    """https://kubernetes.io/docs/tasks/administer-cluster/use-cascading-deletion/ with the sample
    Deployment made again for each kind of deletion, as the page says."""

    def create() -> str:
        stack.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE_DEPLOYMENT)
        stack.kubectl("-n", ns, "rollout", "status", DEPLOY, WAIT)
        pods = get(stack, ns, "pods", "-l", "app=nginx")["items"]
        [rs] = get(stack, ns, "rs", "-l", "app=nginx")["items"]
        for pod in pods:
            [ref] = pod["metadata"]["ownerReferences"]
            assert ref == {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": rs["metadata"]["name"],
                "uid": rs["metadata"]["uid"],
            }
        return str(rs["metadata"]["name"])

    def pods() -> list[str]:
        return [p["metadata"]["name"] for p in get(stack, ns, "pods", "-l", "app=nginx")["items"]]

    # Foreground: kubectl waits until the Deployment is gone, which is after its dependents.
    rs = create()
    out = stack.kubectl("-n", ns, "delete", "deployment", "nginx-deployment", "--cascade=foreground").stdout
    assert out.strip() == 'deployment.apps "nginx-deployment" deleted'
    assert pods() == []
    assert stack.kubectl("-n", ns, "get", "rs", rs, check=False).returncode != 0

    # Background: the Deployment goes at once, its ReplicaSet and pods after it.
    rs = create()
    stack.kubectl("-n", ns, "delete", "deployment", "nginx-deployment", "--cascade=background")
    assert stack.kubectl("-n", ns, "get", DEPLOY, check=False).returncode != 0
    wait_for(lambda: pods() == [], TIMEOUT, what="the pods collected")
    assert stack.kubectl("-n", ns, "get", "rs", rs, check=False).returncode != 0

    # Orphan: the ReplicaSet and its pods stay, without the Deployment as their owner.
    rs = create()
    kept = sorted(pods())
    stack.kubectl("-n", ns, "delete", "deployment", "nginx-deployment", "--cascade=orphan")
    rows = table(stack, ns, "pods", "-l", "app=nginx")
    assert sorted(r["NAME"] for r in rows) == kept and {r["STATUS"] for r in rows} == {"Running"}
    wait_for(
        lambda: not get(stack, ns, "rs", rs)["metadata"].get("ownerReferences"),
        TIMEOUT,
        what="the orphaned ReplicaSet without an owner",
    )
    assert sorted(pods()) == kept


def test_cronjob_page(stack: devstack.DevStack, hello: str) -> None:
    """https://kubernetes.io/docs/tasks/job/automated-tasks-with-cron-jobs/: the CronJob made when
    the module started has fired at a minute boundary since. `kubectl create job --from` runs its
    template at once, as a manual Job the controller does not count as scheduled."""
    ns = hello
    out = stack.kubectl("-n", ns, "create", "job", "--from=cronjob/hello", "hello-manual").stdout
    assert out.strip() == "job.batch/hello-manual created"
    manual = get(stack, ns, "job", "hello-manual")
    assert manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert manual["metadata"]["ownerReferences"][0]["kind"] == "CronJob"

    def scheduled() -> list[dict[str, str]]:
        return [r for r in table(stack, ns, "jobs") if re.fullmatch(r"hello-\d+", r["NAME"])]

    def completed_pods() -> list[str]:
        """The pods of the newest scheduled Job that completed (`kubectl drain` in the PDB test
        deletes a finished pod on its node: a Job it hit has none left)."""
        for job in sorted((r["NAME"] for r in scheduled() if r["COMPLETIONS"] == "1/1"), reverse=True):
            selector = f"--selector=job-name={job}"
            names = stack.kubectl(
                "-n", ns, "get", "pods", selector, "--output=jsonpath={.items[*].metadata.name}"
            ).stdout.split()
            if names:
                return names
        return []

    pods = wait_for(completed_pods, 75, interval=1, what="a scheduled Job completed, with its pod")
    stack.kubectl("-n", ns, "wait", "--for=condition=complete", "job/hello-manual", WAIT)
    [row] = table(stack, ns, "cronjob", "hello")
    assert row["LAST SCHEDULE"] != "<none>"
    logs = stack.kubectl("-n", ns, "logs", *pods).stdout
    assert "Hello from the Kubernetes cluster" in logs
    assert [r for r, _, _ in events(stack, ns, "hello")].count("SuccessfulCreate") >= 1
    out = stack.kubectl("-n", ns, "delete", "cronjob", "hello").stdout
    assert out.strip() == 'cronjob.batch "hello" deleted'
    wait_for(lambda: not table(stack, ns, "jobs"), TIMEOUT, what="the CronJob's Jobs collected")
