"""The simulated containers' built-in shell (kcm_simulator.shell)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kcm_simulator import shell

POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "labels": {"app": "web", "tier": "a b"}},
    "spec": {
        "nodeName": "sim-node-0",
        "serviceAccountName": "default",
        "volumes": [
            {
                "name": "info",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    ]
                },
            },
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                                ]
                            }
                        },
                    ]
                },
            },
        ],
    },
    "status": {"podIP": "10.244.0.2", "hostIP": "10.0.0.1"},
}
CONTAINER: dict[str, Any] = {
    "name": "c",
    "env": [
        {"name": "GREETING", "value": "hello"},
        {"name": "MESSAGE", "value": "$(GREETING) world $$(GREETING)"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ],
    "volumeMounts": [
        {"name": "info", "mountPath": "/etc/podinfo"},
        {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ],
}


@pytest.fixture
def box() -> shell.Container:
    return shell.Container.of(POD, CONTAINER, dt.datetime(2019, 2, 2, 11, 2, 9, tzinfo=dt.UTC))


def out(result: shell.Result) -> str:
    return result.stdout.decode()


def test_environment_resolves_literals_references_and_downward_api(box: shell.Container) -> None:
    env = box.env
    assert env["MESSAGE"] == "hello world $(GREETING)"
    assert (env["POD_NAME"], env["APP"], env["POD_IP"], env["HOSTNAME"]) == (
        "web",
        "web",
        "10.244.0.2",
        "web",
    )
    # A Secret's value is never the simulator's to know: the variable is left out.
    assert "SECRET" not in env
    assert "GREETING=hello\n" in out(box.run(["env"]))
    assert out(box.run(["printenv", "APP"])) == "web\n"
    assert box.run(["printenv", "NOPE"]).code == 1


@pytest.mark.parametrize(
    ("argv", "stdout", "code"),
    [
        (["echo", "hi", "there"], "hi there\n", 0),
        (["echo", "-n", "hi"], "hi", 0),
        (["/bin/hostname"], "web\n", 0),
        (["date"], "Sat Feb  2 11:02:09 UTC 2019\n", 0),
        (["cat", "/etc/podinfo/name"], "web", 0),
        (["cat", "/etc/podinfo/labels"], "app=web\ntier='a b'", 0),
        (["cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"], "ns", 0),
        (["ls", "/etc/podinfo"], "labels\nname\n", 0),
        (["ls", "/var/run/secrets/kubernetes.io"], "serviceaccount\n", 0),
        (["true"], "", 0),
        (["false"], "", 1),
        (["sh", "-c", "exit 3"], "", 3),
        (["sh", "-c", "echo $GREETING ${POD_NAME}; false || echo rescued $?"], "hello web\nrescued 1\n", 0),
        (["sh", "-c", "false && echo never; echo after"], "after\n", 0),
        (["sh", "-c", "echo one; exit 4; echo never"], "one\n", 4),
    ],
)
def test_builtins(box: shell.Container, argv: list[str], stdout: str, code: int) -> None:
    result = box.run(argv)
    assert (out(result), result.code) == (stdout, code)


def test_missing_files_and_commands_fail_as_a_runtime_would(box: shell.Container) -> None:
    missing = box.run(["cat", "/etc/nope"])
    assert (missing.code, missing.stderr) == (1, b"cat: can't open '/etc/nope': No such file or directory\n")
    # The token itself is not simulated.
    assert box.run(["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"]).code == 1
    assert box.run(["ls", "/nowhere"]).code == 1
    with pytest.raises(shell.NotFound, match=r'exec: "foo": executable file not found in \$PATH'):
        box.run(["foo", "bar"])
    inside = box.run(["sh", "-c", "foo"])
    assert (inside.code, inside.stderr) == (127, b"sh: foo: not found\n")
    assert box.run(["sh", "-c", "echo 'unterminated"]).code == 2


def test_stdin_is_read_by_cat_and_a_shell_without_c(box: shell.Container) -> None:
    assert box.run(["cat"], b"typed\n").stdout == b"typed\n"
    assert box.run(["sh"], b"echo a\necho b\n").stdout == b"a\nb\n"
    assert shell.reads_stdin(["cat"]) and shell.reads_stdin(["/bin/sh"])
    assert not shell.reads_stdin(["cat", "/etc/hostname"]) and not shell.reads_stdin(["sh", "-c", "x"])
