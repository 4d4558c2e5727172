"""`kubectl logs / exec / attach` and the official client's exec and port-forward on simulated pods.

The API server proxies pods/log, pods/exec, pods/attach and pods/portforward to the simulator's
kubelet server (its address and port registered on each Node), which answers as
docs/simulator.md says: logs are a run's start line, command line, what the built-in shell
prints for the command, and its exit line; exec runs the built-in shell; port-forward answers
HTTP with the pod and port. Over WebSockets (kubectl's v5.channel.k8s.io, the Python client's
v4.channel.k8s.io). One stack, a namespace per test.
"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.stream import portforward, stream

from tests.conftest import KUBECTL, wait_for
from tests.e2e import devstack

stack = devstack.stack_fixture("--controllers", "serviceaccount", "--nodes", "1")


@pytest.fixture(scope="module")
def core(stack: devstack.DevStack) -> Iterator[kubernetes.client.CoreV1Api]:
    with stack.api() as api:
        yield kubernetes.client.CoreV1Api(api)


def namespace(s: devstack.DevStack, name: str) -> str:
    s.kubectl("create", "namespace", name)
    # kube-apiserver's ServiceAccount admission waits for the namespace's default account.
    wait_for(lambda: s.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0, 30)
    return name


def running(s: devstack.DevStack, ns: str, pod: str) -> None:
    s.kubectl("wait", "-n", ns, f"pod/{pod}", "--for=jsonpath={.status.phase}=Running", "--timeout=60s")


def test_logs_follow_and_tail(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "logs")
    stack.kubectl(
        "run", "-n", ns, "hello", "--image=busybox", "--restart=Never",
        "--annotations=sim.kcm.dev/run-seconds=3", "--", "sh", "-c", "echo hello; echo world",
    )  # fmt: skip
    running(stack, ns, "hello")
    # -f returns once the container exits, having shown the exit line it printed meanwhile.
    followed = stack.kubectl("logs", "-n", ns, "hello", "-f").stdout.splitlines()
    assert followed == [
        "sim: container hello started (image busybox)",
        "$ sh -c 'echo hello; echo world'",
        "hello",
        "world",
        "sim: container hello exited with code 0 (Completed)",
    ]
    assert stack.kubectl("logs", "-n", ns, "hello", "--tail=2").stdout.splitlines() == followed[-2:]
    stamped = stack.kubectl("logs", "-n", ns, "hello", "--timestamps", "--tail=1").stdout
    assert stamped.endswith("Z sim: container hello exited with code 0 (Completed)\n"), stamped
    previous = stack.kubectl("logs", "-n", ns, "hello", "--previous", check=False)
    assert previous.returncode != 0
    assert 'previous terminated container "hello" in pod "hello" not found' in previous.stderr


def test_logs_need_a_container_name_when_there_are_several(
    stack: devstack.DevStack, core: kubernetes.client.CoreV1Api
) -> None:
    ns = namespace(stack, "logs-two")
    pod = {
        "metadata": {"name": "two"},
        "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "redis"}]},
    }
    core.create_namespaced_pod(ns, pod)
    running(stack, ns, "two")
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.read_namespaced_pod_log("two", ns)
    assert caught.value.status == 400
    assert "a container name must be specified for pod two, choose one of: [a b]" in str(caught.value.body)
    assert (
        core.read_namespaced_pod_log("two", ns, container="b") == "sim: container b started (image redis)\n"
    )


def test_exec_echo_stdin_exit_code_and_unknown_command(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "exec")
    stack.kubectl("run", "-n", ns, "web", "--image=nginx", "--env=GREETING=hi there")
    running(stack, ns, "web")
    assert stack.kubectl("exec", "-n", ns, "web", "--", "echo", "hi").stdout == "hi\n"
    assert stack.kubectl("exec", "-n", ns, "web", "--", "sh", "-c", "echo $GREETING").stdout == "hi there\n"
    typed = stack.kubectl("exec", "-i", "-n", ns, "web", "--", "cat", input="line one\nline two\n")
    assert typed.stdout == "line one\nline two\n"
    failed = stack.kubectl("exec", "-n", ns, "web", "--", "sh", "-c", "exit 3", check=False)
    assert failed.returncode == 3
    assert "command terminated with exit code 3" in failed.stderr
    unknown = stack.kubectl("exec", "-n", ns, "web", "--", "foo", check=False)
    assert unknown.returncode != 0
    assert 'exec: "foo": executable file not found in $PATH' in unknown.stderr


def test_attach_streams_the_output_until_the_container_exits(stack: devstack.DevStack) -> None:
    ns = namespace(stack, "attach")
    stack.kubectl(
        "run", "-n", ns, "job", "--image=busybox", "--restart=Never",
        "--annotations=sim.kcm.dev/run-seconds=4", "--", "echo", "attached",
    )  # fmt: skip
    running(stack, ns, "job")
    argv = [KUBECTL, "--kubeconfig", str(stack.kubeconfig), "attach", "-n", ns, "job"]
    attached = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert attached.returncode == 0, attached.stderr
    lines = attached.stdout.splitlines()
    assert lines[0] == "sim: container job started (image busybox)"
    assert "attached" in lines
    assert lines[-1] == "sim: container job exited with code 0 (Completed)"


def serving_pod(core: kubernetes.client.CoreV1Api, ns: str) -> None:
    pod = {
        "metadata": {"name": "srv"},
        "spec": {
            "containers": [
                {
                    "name": "srv",
                    "image": "nginx",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                }
            ]
        },
    }
    core.create_namespaced_pod(ns, pod)


def test_python_client_exec(stack: devstack.DevStack, core: kubernetes.client.CoreV1Api) -> None:
    ns = namespace(stack, "client-exec")
    serving_pod(core, ns)
    running(stack, ns, "srv")
    out = stream(
        core.connect_get_namespaced_pod_exec, "srv", ns,
        command=["sh", "-c", "echo $MY_POD; hostname"], stdout=True, stderr=True, stdin=False, tty=False,
    )  # fmt: skip
    assert out == "srv\nsrv\n"


def test_python_client_port_forward(stack: devstack.DevStack, core: kubernetes.client.CoreV1Api) -> None:
    ns = namespace(stack, "client-pf")
    serving_pod(core, ns)
    running(stack, ns, "srv")
    forwarded = portforward(core.connect_get_namespaced_pod_portforward, "srv", ns, ports="8080")
    try:
        sock = forwarded.socket(8080)
        sock.setblocking(True)
        sock.settimeout(30)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: srv\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert answer.endswith(b"\r\n\r\npod client-pf/srv port 8080\n")
        assert forwarded.error(8080) is None
    finally:
        forwarded.close()


def test_kubectl_port_forward(stack: devstack.DevStack, core: kubernetes.client.CoreV1Api) -> None:
    """kubectl 1.32 tunnels SPDY/3.1 inside a WebSocket (`SPDY/3.1+portforward.k8s.io`)."""
    ns = namespace(stack, "kubectl-pf")
    serving_pod(core, ns)
    running(stack, ns, "srv")
    argv = [KUBECTL, "--kubeconfig", str(stack.kubeconfig), "port-forward", "-n", ns, "pod/srv", ":8080"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        # `Forwarding from 127.0.0.1:NNNNN -> 8080`: the local port kubectl chose.
        first = proc.stdout.readline()
        assert first.startswith("Forwarding from 127.0.0.1:"), first + (
            proc.stderr.read() if proc.stderr else ""
        )
        local = int(first.split("127.0.0.1:", 1)[1].split(" ", 1)[0])
        for _ in range(2):  # each connection is a stream pair of its own
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
                assert resp.status == 200
                assert resp.read() == b"pod kubectl-pf/srv port 8080\n"
    finally:
        proc.terminate()
        proc.wait(10)
