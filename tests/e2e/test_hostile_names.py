"""Hostile names against a whole `kcm dev` (the garbage collector alone): owner references
whose names are built to break out of a URL.

kube-apiserver accepts any non-empty ownerReference name, so any user who can create an
object chooses the name the collector then GETs with its own credentials. The first test is
the attack from issue 13: a name holding CR/LF and a second request line smuggled a DELETE of
an unrelated ConfigMap into the collector's connection. The second covers every character a
name must not be able to use to mean another object.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack
from tests.support.names import HOSTILE_NAMES

stack = devstack.stack_fixture("--controllers", "garbagecollector", "--nodes", "0")


@pytest.fixture()
def namespace(stack: devstack.DevStack) -> Iterator[str]:
    name = f"hostile-{uuid.uuid4().hex[:8]}"
    stack.kubectl("create", "namespace", name)
    yield name


def configmap(namespace: str, name: str, *owner_names: str) -> dict[str, Any]:
    """A ConfigMap owned by ConfigMaps of these names, with uids that no object has."""
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": str(uuid.uuid4())} for n in owner_names
    ]
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if refs:
        meta["ownerReferences"] = refs
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def create(s: devstack.DevStack, obj: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = json.loads(
        s.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(obj)).stdout
    )
    return created


def names(s: devstack.DevStack, namespace: str) -> set[str]:
    items = json.loads(s.kubectl("get", "configmaps", "-n", namespace, "-o", "json").stdout)["items"]
    return {item["metadata"]["name"] for item in items}


def test_a_request_smuggled_in_an_owner_name_deletes_nothing(
    stack: devstack.DevStack, namespace: str
) -> None:
    victim = create(stack, configmap(namespace, "victim"))
    smuggled = (
        "x HTTP/1.1\r\nHost: h\r\n\r\n"
        f"DELETE /api/v1/namespaces/{namespace}/configmaps/victim HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
        f"DELETE /api/v1/namespaces/{namespace}/configmaps/victim"
    )
    create(stack, configmap(namespace, "dependent", smuggled))

    # The dependent's only owner does not exist: the collector deletes it. Waiting on either
    # outcome ends early when the attack works (victim gone, dependent never collected).
    left: set[str] = set()

    def changed() -> bool:
        nonlocal left
        left = names(stack, namespace)
        return left != {"victim", "dependent"}

    wait_for(changed, 60, 0.5, "the collector to act on the dependent")
    assert left == {"victim"}, f"left in the namespace: {left}"
    still = json.loads(stack.kubectl("get", "configmap", "victim", "-n", namespace, "-o", "json").stdout)
    assert still["metadata"]["uid"] == victim["metadata"]["uid"]


def test_owners_with_hostile_names_are_looked_up_by_those_names(
    stack: devstack.DevStack, namespace: str
) -> None:
    made = [configmap(namespace, "victim")]
    made += [configmap(namespace, f"dep{i}", owner) for i, owner in enumerate(HOSTILE_NAMES)]
    stack.kubectl("create", "-f", "-", input="\n".join(json.dumps(obj) for obj in made))
    dependents = {f"dep{i}" for i in range(len(HOSTILE_NAMES))}
    # None of those owners exists (whatever `victim` is called in a mangled URL): every
    # dependent is collected, and `victim` is neither mistaken for an owner nor touched.
    wait_for(
        lambda: not (names(stack, namespace) & dependents),
        60,
        0.5,
        f"every dependent collected; owner names: {HOSTILE_NAMES}",
    )
    assert names(stack, namespace) == {"victim"}
