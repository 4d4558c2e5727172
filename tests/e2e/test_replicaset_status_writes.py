"""The ReplicaSet controller's status writes against a real API server, with a cache that lags.

Under load a sync can start before the event of the controller's own last status write has
come back through the bus. It must then start from the object that write returned, not
from the cache's older copy, or its next write is refused with 409 Conflict and retried.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any, cast

from kcm_controllers.replicaset import controller as replicaset
from kcm_shared.apimachinery import codec
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podranking
from kcm_shared.controllerutil.replicaset import replicastatus as status
from kcm_shared.runtime import cache
from kcm_shared.testing import recorders

from tests.conftest import ApiServer

NS, NAME = "default", "lagging"
KEY = f"{NS}/{NAME}"
PATH = kubeclient.resource_path("apps", "v1", "replicasets", NS, NAME)
MANIFEST = textwrap.dedent(f"""\
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {{name: {NAME}, namespace: {NS}}}
    spec:
      replicas: 3
      selector: {{matchLabels: {{app: {NAME}}}}}
      template:
        metadata: {{labels: {{app: {NAME}}}}}
        spec: {{containers: [{{name: c, image: nginx}}]}}
    """)


def conflicts(metrics: str) -> int:
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics.splitlines()
        if line.startswith("apiserver_request_total{") and 'code="409"' in line
    )


async def scenario(server: ApiServer) -> tuple[int, dict[str, Any], status.ReplicaSetView]:
    client = kubeclient.KubeClient(kubeclient.load_connection(str(server.kubeconfig)), qps=0)
    unfed = cast(Any, None)  # caches are never read here: the test plays the lagging cache
    rsc = replicaset.ReplicaSetController(
        client,
        cache.Cache(unfed, unfed, replicaset.REPLICASETS, status.ReplicaSetView),
        cache.Cache(unfed, unfed, replicaset.PODS, podranking.PodView),
        lambda key: None,
        lambda key, delay: None,
        recorders.RecordingPodControl(),
    )
    try:
        before = conflicts((await client.request_bytes("GET", "/metrics")).decode())
        cached = codec.decode(await client.request_bytes("GET", PATH), status.ReplicaSetView)
        # Three syncs in a row, each counting one more pod, while the cache still shows the
        # ReplicaSet as it was before the first of them.
        for replicas in (1, 2, 3):
            rs = rsc.own_writes.latest(KEY, cached)
            assert rs is not None
            await rsc.write_status(KEY, PATH, rs, status.ReplicaSetStatus(replicas=replicas))
        refused = conflicts((await client.request_bytes("GET", "/metrics")).decode()) - before
        written = await client.get(PATH)
        # Someone else changes the object: the cache shows a version the controller never
        # wrote, and that is what the next sync must start from.
        changed = await client.request_bytes(
            "PATCH",
            PATH,
            body={"metadata": {"labels": {"touched": "yes"}}},
            content_type=kubeclient.PATCH_TYPES["merge"],
        )
        fresh = codec.decode(changed, status.ReplicaSetView)
        after_other = rsc.own_writes.latest(KEY, fresh)
        assert after_other is not None
        return refused, written, after_other
    finally:
        await client.close()


def test_syncs_ahead_of_the_cache_write_status_without_conflicts(fresh_apiserver: ApiServer) -> None:
    fresh_apiserver.kubectl("apply", "-f", "-", input=MANIFEST)
    refused, written, after_other = asyncio.run(scenario(fresh_apiserver))
    assert refused == 0, f"{refused} status writes were refused with 409 Conflict"
    assert written["status"]["replicas"] == 3
    assert after_other.metadata.labels == {"touched": "yes"}, "someone else's change must win"
    assert json.loads(fresh_apiserver.kubectl("get", "rs", NAME, "-o", "json"))["status"]["replicas"] == 3
