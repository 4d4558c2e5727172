"""ControllerRef claiming (adopt / release) against the embedded API server.

Each scenario creates a ReplicaSet as the owner and a few pods, runs `controllerref.claim`
on views decoded from what the server returned, and checks the pods' ownerReferences on the
server afterwards.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
from kcm_shared.apimachinery import codec, gvr, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import controllerref

from tests.conftest import ApiServer

PODS = gvr.Resource("", "v1", "pods")
_names = itertools.count()
SELECTOR = selectors.label_selector_from_dict({"matchLabels": {"app": "claim"}})


class Env:
    def __init__(self, client: kubeclient.KubeClient, ns: str) -> None:
        self.client = client
        self.ns = ns

    def path(self, resource: str, name: str | None = None) -> str:
        group, version = ("apps", "v1") if resource == "replicasets" else ("", "v1")
        return kubeclient.resource_path(group, version, resource, self.ns, name)

    async def owner(self, name: str = "owner") -> codec.Meta:
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "claim"}},
                "template": {
                    "metadata": {"labels": {"app": "claim"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
        return view(await self.client.create(self.path("replicasets"), rs))

    async def pod(
        self, name: str, labels: dict[str, str], owners: list[dict[str, Any]] | None = None
    ) -> codec.Meta:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "ownerReferences": owners or []},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        return view(await self.client.create(self.path("pods"), body))

    async def refs(self, name: str) -> list[dict[str, Any]]:
        pod = await self.client.get(self.path("pods", name))
        refs: list[dict[str, Any]] = pod["metadata"].get("ownerReferences", [])
        return refs

    async def claim(
        self,
        owner: codec.Meta,
        pods: list[codec.Meta],
        can_adopt: Callable[[], Awaitable[None]] | None = None,
    ) -> list[str]:
        check = can_adopt or controllerref.recheck(
            self.client, self.path("replicasets", owner.metadata.name), owner.metadata.uid
        )
        claimed = await controllerref.claim(
            self.client, owner, "apps/v1", "ReplicaSet", SELECTOR, pods, PODS, check
        )
        return sorted(p.metadata.name for p in claimed)


def view(obj: dict[str, Any]) -> codec.Meta:
    return codec.decode(msgspec.json.encode(obj), codec.Meta)


def ref_to(owner: codec.Meta) -> dict[str, Any]:
    return msgspec.to_builtins(controllerref.new_controller_ref(owner, "apps/v1", "ReplicaSet"))  # type: ignore[no-any-return]


def scenario(apiserver: ApiServer, body: Callable[[Env], Awaitable[None]]) -> None:
    async def main() -> None:
        client = kubeclient.KubeClient(kubeclient.load_connection(str(apiserver.kubeconfig)), qps=0)
        try:
            ns = f"claim-{next(_names)}"
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            await body(Env(client, ns))
        finally:
            await client.close()

    asyncio.run(main())


def test_adopts_matching_orphans_and_keeps_its_own(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        orphan = await env.pod("orphan", {"app": "claim"})
        mine = await env.pod("mine", {"app": "claim"}, [ref_to(owner)])
        stranger = await env.pod("stranger", {"app": "other"})
        assert await env.claim(owner, [orphan, mine, stranger]) == ["mine", "orphan"]
        assert await env.refs("orphan") == [ref_to(owner)]
        assert await env.refs("stranger") == []

    scenario(apiserver, body)


def test_releases_own_pods_that_stop_matching(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        other_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other-uid"}
        moved = await env.pod("moved", {"app": "elsewhere"}, [ref_to(owner), other_ref])
        assert await env.claim(owner, [moved]) == []
        assert await env.refs("moved") == [other_ref]  # only the owner's reference went

    scenario(apiserver, body)


def test_leaves_pods_controlled_by_another_owner(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        other = await env.owner("other")
        theirs = await env.pod("theirs", {"app": "claim"}, [ref_to(other)])
        assert await env.claim(owner, [theirs]) == []
        assert await env.refs("theirs") == [ref_to(other)]

    scenario(apiserver, body)


def test_an_owner_being_deleted_neither_adopts_nor_releases(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        orphan = await env.pod("orphan", {"app": "claim"})
        moved = await env.pod("moved", {"app": "elsewhere"}, [ref_to(owner)])
        deleting = msgspec.structs.replace(
            owner,
            metadata=msgspec.structs.replace(owner.metadata, deletion_timestamp=dt.datetime.now(dt.UTC)),
        )
        assert await env.claim(deleting, [orphan, moved]) == []
        assert await env.refs("orphan") == []
        assert await env.refs("moved") == [ref_to(owner)]

    scenario(apiserver, body)


def test_can_adopt_is_asked_once_and_its_refusal_is_an_error(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        orphans = [await env.pod(f"orphan-{i}", {"app": "claim"}) for i in range(3)]
        mine = await env.pod("mine", {"app": "claim"}, [ref_to(owner)])
        asked = 0

        async def refuse() -> None:
            nonlocal asked
            asked += 1
            raise RuntimeError("owner is being deleted")

        with pytest.raises(controllerref.ClaimError) as caught:
            await env.claim(owner, [*orphans, mine], refuse)
        assert asked == 1
        assert len(caught.value.errors) == 3
        assert "can't adopt pods" in str(caught.value)
        for orphan in orphans:
            assert await env.refs(orphan.metadata.name) == []

    scenario(apiserver, body)


def test_recheck_refuses_a_deleted_or_replaced_owner(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        orphan = await env.pod("orphan", {"app": "claim"})
        await env.client.delete(env.path("replicasets", "owner"))
        replaced = await env.owner()  # same name, new uid: the cached owner is gone
        assert replaced.metadata.uid != owner.metadata.uid
        with pytest.raises(controllerref.ClaimError, match="is gone"):
            await env.claim(owner, [orphan])
        assert await env.refs("orphan") == []

    scenario(apiserver, body)


def test_the_uid_precondition_protects_a_recreated_pod(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        stale = await env.pod("reborn", {"app": "claim"})
        await env.client.delete(env.path("pods", "reborn"))
        await env.pod("reborn", {"app": "claim"})  # same name, new uid
        # Adopting through the stale view fails instead of adopting the new pod.
        with pytest.raises(controllerref.ClaimError):
            await env.claim(owner, [stale])
        assert await env.refs("reborn") == []
        # Releasing through a stale view is ignored (422), as upstream does.
        stale_mine = msgspec.structs.replace(
            stale,
            metadata=msgspec.structs.replace(
                stale.metadata,
                owner_references=[controllerref.new_controller_ref(owner, "apps/v1", "ReplicaSet")],
                labels={"app": "x"},
            ),
        )
        assert await env.claim(owner, [stale_mine]) == []

    scenario(apiserver, body)


def test_objects_being_deleted_are_not_adopted(apiserver: ApiServer) -> None:
    async def body(env: Env) -> None:
        owner = await env.owner()
        orphan = await env.pod("going", {"app": "claim"})
        going = msgspec.structs.replace(
            orphan,
            metadata=msgspec.structs.replace(orphan.metadata, deletion_timestamp=dt.datetime.now(dt.UTC)),
        )
        assert await env.claim(owner, [going]) == []
        assert await env.refs("going") == []

    scenario(apiserver, body)
