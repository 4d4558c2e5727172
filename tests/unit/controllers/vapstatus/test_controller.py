"""The status controller's sync: nothing while the status has seen the generation; else one
forced server-side apply of the status subresource with the generation and the warnings
(`typeChecking: {}` when there are none), as upstream's apply configuration."""

from __future__ import annotations

import asyncio
from typing import Any

from kcm_controllers.vapstatus import controller, policy
from kcm_shared.testing import caches, fakeclient

PATH = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p/status"


def doc(generation: int, observed: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": "p", "uid": "u1", "generation": generation},
        "spec": {"validations": [{"expression": "object.spec.replicas > 1"}]},
    }
    if observed is not None:
        out["status"] = {"observedGeneration": observed}
    return out


class ApplyClient(fakeclient.FakeClient):
    """Answers a server-side apply with its body (the fake merges no apply patches)."""

    async def handle(self, action: fakeclient.Action) -> Any:
        if action.patch_type == "apply":
            return action.body
        return await super().handle(action)


def run(d: dict[str, Any]) -> fakeclient.FakeClient:
    client = ApplyClient()
    client.add("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p", d)
    store = caches.new(policy.POLICIES, policy.PolicyView, [d])
    sc = controller.StatusController(
        client, store, lambda _key: None, controller.typecheck.TypeChecker(client)
    )
    asyncio.run(sc.sync("p"))
    return client


def test_a_status_that_saw_the_generation_is_left_alone() -> None:
    assert run(doc(2, 2)).calls("patch") == []


def test_a_new_generation_applies_the_status() -> None:
    client = run(doc(3, 1))
    ((_, path, body),) = client.calls("patch")
    assert path == PATH
    assert client.actions[-1].params == {"fieldManager": "validatingadmissionpolicy-status", "force": "true"}
    assert body == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "status": {"observedGeneration": 3, "typeChecking": {}},
    }


def test_a_first_generation_without_status_is_applied() -> None:
    assert len(run(doc(1, None)).calls("patch")) == 1


def test_a_policy_gone_from_the_cache_is_nothing_to_do() -> None:
    client = fakeclient.FakeClient()
    store = caches.new(policy.POLICIES, policy.PolicyView, [])
    sc = controller.StatusController(
        client, store, lambda _key: None, controller.typecheck.TypeChecker(client)
    )
    assert asyncio.run(sc.sync("p")) is None
    assert client.calls() == []
