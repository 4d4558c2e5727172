"""The deployment controller's writes against the testing kit's fake API server, where upstream's
messages and error handling show: a failed replica set create (Event and Progressing
condition), a failed scale-down of old replica sets (not an error of the sync)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
from kcm_controllers.deployment import controller as deployment_controller
from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.testing import caches, fakeclient, recorders

from tests.support.deployment import deployment, rs

RSS = "/apis/apps/v1/namespaces/default/replicasets"


def sync(
    client: fakeclient.FakeClient,
) -> tuple[deployment_controller.DeploymentSync, recorders.RecordingEventRecorder]:
    events = recorders.RecordingEventRecorder()
    stores: dict[Any, Any] = {
        res: caches.new(res, view) for res, view in deployment_controller.SPEC.views.items()
    }
    ctx = runtime.Context("deployment-controller", client, stores, lambda key: None, cast(Any, events))
    return deployment_controller.DeploymentSync(ctx), events


def test_a_failed_replica_set_create_reports_the_api_servers_message() -> None:
    client = fakeclient.FakeClient()
    client.fail("create", RSS, kubeclient.ApiError(403, "Forbidden", "exceeded quota: q"))
    ds, events = sync(client)
    d = deployment(1, 1, 0, deadline=600)
    d = msgspec.structs.replace(
        d,
        spec=msgspec.structs.replace(d.spec, template=msgspec.Raw(b'{"metadata":{"labels":{"foo":"bar"}}}')),
    )
    try:
        asyncio.run(ds._create_replica_set(d, [], 1))
    except kubeclient.ApiError:
        pass
    else:
        raise AssertionError("the create's error is the sync's")
    ((kind, reason, message),) = events.seen()
    assert (kind, reason) == ("Warning", "ReplicaSetCreateError")
    assert message.startswith('Failed to create new replica set "foo-') and message.endswith(
        '": exceeded quota: q'
    )


def test_a_failed_scale_down_of_old_replica_sets_is_no_error_of_the_sync() -> None:
    # Upstream reconcileOldReplicaSets answers (false, nil): the sync goes on to the status.
    client = fakeclient.FakeClient()
    client.fail("patch", None, kubeclient.ApiError(500, "InternalError", "etcd timed out"))
    ds, _ = sync(client)
    d = deployment(10, 0, 2)
    new, old = rs("foo-new", 10, available=10), rs("foo-old", 2, available=2)
    assert asyncio.run(ds._reconcile_old(d, [old, new], [old], new)) is False
    assert [verb for verb, _, _ in client.calls()] == ["patch"]
