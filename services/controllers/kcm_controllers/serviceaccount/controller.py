"""The ServiceAccount controller: a `default` ServiceAccount in every active namespace.

Upstream pkg/controller/serviceaccount/serviceaccounts_controller.go on our runtime
(docs/runtime.md). The work keys are namespace names: a namespace added or updated queues
itself, a ServiceAccount deleted queues its namespace. The sync reads the namespace from the
cache and, when it is Active (a Terminating one gets nothing new), creates each missing
ServiceAccount of `ENSURE` (upstream's DefaultServiceAccountsControllerOptions: `default`).
A create that finds the account already there (a cache behind our own write) or the namespace
terminating is not an error, as upstream; any other failure is raised, so the key is retried
with backoff. Called by the runtime through `SPEC`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import podcontrol
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.serviceaccount")

NAMESPACES = gvr.Resource("", "v1", "namespaces")
SERVICEACCOUNTS = gvr.Resource("", "v1", "serviceaccounts")
ENSURE = ("default",)
ACTIVE = "Active"


class ServiceAccountsController:
    """Handlers and sync; the API client and caches are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        namespaces: cache.Cache[codec.NamespaceView],
        accounts: cache.Cache[codec.Meta],
        enqueue: Callable[[str], None],
    ) -> None:
        self.client = client
        self.namespaces = namespaces
        self.accounts = accounts
        self.enqueue = enqueue

    def register(self) -> None:
        self.namespaces.add_handler(
            on_add=lambda ns: self.enqueue(ns.metadata.name),
            on_update=lambda _, ns: self.enqueue(ns.metadata.name),
        )
        self.accounts.add_handler(on_delete=lambda sa: self.enqueue(sa.metadata.namespace))

    async def sync(self, namespace: str) -> runtime.Result | None:
        ns = self.namespaces.get("", namespace)
        if ns is None or ns.status.phase != ACTIVE:
            return None
        failures: list[kubeclient.ApiError] = []
        for name in ENSURE:
            if self.accounts.get(namespace, name) is not None:
                continue
            body = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            }
            try:
                await self.client.create(
                    kubeclient.resource_path("", "v1", "serviceaccounts", namespace), body
                )
                log.info("created service account", extra={"namespace": namespace, "serviceAccount": name})
            except kubeclient.ApiError as exc:
                if exc.conflict or podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE):
                    continue
                failures.append(exc)
        if failures:
            raise failures[0]
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    sac = ServiceAccountsController(
        ctx.client, ctx.caches[NAMESPACES], ctx.caches[SERVICEACCOUNTS], ctx.enqueue
    )
    sac.register()
    return sac.sync


SPEC = runtime.Spec(
    name="serviceaccount-controller",
    alias="serviceaccount",
    queue_name="serviceaccount",
    primary=NAMESPACES,
    views={NAMESPACES: codec.NamespaceView, SERVICEACCOUNTS: codec.Meta},
    build=build,
    workers=1,  # upstream runs it with one worker and no flag
    package=__package__,
)
