"""The ServiceAccount controller and the root CA publisher end to end: `kcm dev --controllers
serviceaccount,root-ca-cert-publisher --root-ca-file=CA`, driven with kubectl.

Each test works in namespaces of its own on one shared stack: a new namespace gets the
`default` ServiceAccount and the `kube-root-ca.crt` ConfigMap holding the file's bundle with
upstream's description; either one deleted comes back; an edited ConfigMap is put right while
the user's own label stays; a Terminating namespace gets no new ServiceAccount; namespaces
created while the controllers' process is killed (-9) get both once `kcm dev` restarted it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kcm_controllers.rootcacertpublisher import controller as publisher

from tests import certs
from tests.conftest import wait_for
from tests.e2e import devstack

_counter = iter(range(1000))


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("ca") / "ca.crt"
    pem = certs.self_signed_ca("kcm-test-ca")
    path.write_text(pem)
    return path, pem


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, ca: tuple[Path, str]) -> Iterator[devstack.DevStack]:
    args = ("--controllers", "serviceaccount,root-ca-cert-publisher", "--nodes", "0")
    with devstack.dev_stack(tmp_path_factory.mktemp("devstack"), *args, f"--root-ca-file={ca[0]}") as s:
        yield s


def new_namespace(stack: devstack.DevStack) -> str:
    name = f"sa-{next(_counter)}"
    stack.kubectl("create", "namespace", name)
    return name


def get(stack: devstack.DevStack, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    res = stack.kubectl("get", kind, name, "-n", ns, "-o", "json", "--ignore-not-found")
    return json.loads(res.stdout) if res.stdout.strip() else None


def published(stack: devstack.DevStack, ns: str, bundle: str) -> dict[str, Any] | None:
    """The namespace's kube-root-ca.crt once it is what the publisher writes."""
    cm = get(stack, "configmap", publisher.CONFIGMAP_NAME, ns)
    if cm is None or cm.get("data") != {"ca.crt": bundle}:
        return None
    if cm["metadata"].get("annotations", {}).get("kubernetes.io/description") != publisher.DESCRIPTION:
        return None
    return cm


def test_a_new_namespace_gets_the_default_account_and_the_root_ca(
    stack: devstack.DevStack, ca: tuple[Path, str]
) -> None:
    ns = new_namespace(stack)
    wait_for(lambda: get(stack, "serviceaccount", "default", ns), 30, 0.2, "default ServiceAccount")
    cm = wait_for(lambda: published(stack, ns, ca[1]), 30, 0.2, "kube-root-ca.crt")
    assert cm["data"]["ca.crt"] == ca[0].read_text()


def test_deleted_account_and_configmap_come_back(stack: devstack.DevStack, ca: tuple[Path, str]) -> None:
    ns = new_namespace(stack)
    sa = wait_for(lambda: get(stack, "serviceaccount", "default", ns), 30, 0.2, "default ServiceAccount")
    cm = wait_for(lambda: published(stack, ns, ca[1]), 30, 0.2, "kube-root-ca.crt")
    stack.kubectl("delete", "serviceaccount", "default", "-n", ns)
    stack.kubectl("delete", "configmap", publisher.CONFIGMAP_NAME, "-n", ns)

    def recreated(kind: str, name: str, old: dict[str, Any]) -> dict[str, Any] | None:
        now = get(stack, kind, name, ns)
        return now if now and now["metadata"]["uid"] != old["metadata"]["uid"] else None

    wait_for(lambda: recreated("serviceaccount", "default", sa), 30, 0.2, "default ServiceAccount again")
    again = wait_for(lambda: recreated("configmap", publisher.CONFIGMAP_NAME, cm), 30, 0.2, "ConfigMap again")
    assert again["data"] == {"ca.crt": ca[1]}


def test_an_edited_configmap_is_put_right_and_keeps_other_fields(
    stack: devstack.DevStack, ca: tuple[Path, str]
) -> None:
    ns = new_namespace(stack)
    wait_for(lambda: published(stack, ns, ca[1]), 30, 0.2, "kube-root-ca.crt")
    edit = {
        "metadata": {"labels": {"mine": "kept"}, "annotations": {"kubernetes.io/description": None}},
        "data": {"ca.crt": "not the bundle", "extra": "dropped"},
    }
    stack.kubectl(
        "patch", "configmap", publisher.CONFIGMAP_NAME, "-n", ns, "--type=merge", "-p", json.dumps(edit)
    )
    cm = wait_for(lambda: published(stack, ns, ca[1]), 30, 0.2, "kube-root-ca.crt put right")
    assert cm["metadata"]["labels"] == {"mine": "kept"}


def test_a_terminating_namespace_gets_no_new_account(stack: devstack.DevStack, ca: tuple[Path, str]) -> None:
    ending, control = new_namespace(stack), new_namespace(stack)
    for ns in (ending, control):
        wait_for(lambda ns=ns: get(stack, "serviceaccount", "default", ns), 30, 0.2, "default ServiceAccount")
    # No namespace controller runs here: the namespace stays Terminating with its content.
    stack.kubectl("delete", "namespace", ending, "--wait=false")
    phase = lambda: stack.kubectl("get", "namespace", ending, "-o", "jsonpath={.status.phase}").stdout  # noqa: E731
    wait_for(lambda: phase() == "Terminating", 30, 0.2, "namespace Terminating")
    stack.kubectl("delete", "serviceaccount", "default", "-n", ending)
    stack.kubectl("delete", "serviceaccount", "default", "-n", control)
    # The control namespace's account, deleted after, is back: the controller has had its turn.
    wait_for(lambda: get(stack, "serviceaccount", "default", control), 30, 0.2, "control account again")
    assert get(stack, "serviceaccount", "default", ending) is None


def test_namespaces_made_while_the_controllers_are_killed_get_both(
    stack: devstack.DevStack, ca: tuple[Path, str]
) -> None:
    pids = stack.controller_pids("serviceaccount")
    assert pids and pids == stack.controller_pids("root-ca-cert-publisher")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    made = [new_namespace(stack) for _ in range(4)]
    for ns in made:
        wait_for(lambda ns=ns: get(stack, "serviceaccount", "default", ns), 90, 0.3, f"account in {ns}")
        wait_for(lambda ns=ns: published(stack, ns, ca[1]), 90, 0.3, f"kube-root-ca.crt in {ns}")
    assert not set(stack.controller_pids("serviceaccount")) & set(pids)
