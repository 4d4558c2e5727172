"""The ClusterRole aggregation controller: an aggregated ClusterRole's rules follow the roles
its `aggregationRule.clusterRoleSelectors` select.

Upstream pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go on our
runtime (docs/runtime.md). Any ClusterRole added, updated or deleted queues every ClusterRole
that has an aggregation rule, as upstream does: the set of roles is small and the chains
between them (admin selects edit, which selects view) are not worth tracking. The sync
computes the union of the selected roles' rules (`rules.aggregate`) and, when it differs
from the role's rules, writes it with server-side apply as field manager
`clusterrole-aggregation-controller`, forcing ownership of `rules`; an empty union sends no
`rules`, so the apply removes them. A role's change re-queues the aggregated roles, so a
chain settles one link per round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.apimachinery import gvr
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

from kcm_controllers.clusterroleaggregation import rules

log = logging.getLogger("kcm.clusterroleaggregation")

CLUSTERROLES = gvr.Resource("rbac.authorization.k8s.io", "v1", "clusterroles")
FIELD_MANAGER = "clusterrole-aggregation-controller"


class ClusterRoleAggregationController:
    """Handlers and sync; the API client and cache are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        roles: cache.Cache[rules.ClusterRoleView],
        enqueue: Callable[[str], None],
    ) -> None:
        self.client = client
        self.roles = roles
        self.enqueue = enqueue

    def register(self) -> None:
        self.roles.add_handler(
            on_add=lambda _: self.enqueue_aggregated(),
            on_update=lambda _, __: self.enqueue_aggregated(),
            on_delete=lambda _: self.enqueue_aggregated(),
        )

    def enqueue_aggregated(self) -> None:
        for role in self.roles.list():
            if role.aggregation_rule is not None:
                self.enqueue(role.metadata.name)

    async def sync(self, name: str) -> runtime.Result | None:
        role = self.roles.get("", name)
        if role is None or role.aggregation_rule is None:
            return None
        union = rules.aggregate(role, self.roles.list())
        if union == (role.rules or []):
            return None
        await self.client.patch(
            kubeclient.resource_path(
                CLUSTERROLES.group, CLUSTERROLES.version, CLUSTERROLES.resource, name=name
            ),
            rules.apply_body(name, union),
            "apply",
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
        )
        log.info("aggregated rules", extra={"clusterrole": name, "rules": len(union)})
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    crac = ClusterRoleAggregationController(ctx.client, ctx.caches[CLUSTERROLES], ctx.enqueue)
    crac.register()
    return crac.sync


SPEC = runtime.Spec(
    name="clusterrole-aggregation-controller",
    alias="clusterrole-aggregation",
    queue_name="ClusterRoleAggregator",
    primary=CLUSTERROLES,
    views={CLUSTERROLES: rules.ClusterRoleView},
    build=build,
    workers=5,  # upstream starts it with five workers and no flag
    package=__package__,
)
