"""The validatingadmissionpolicy-status-controller: a policy's status.observedGeneration and
status.typeChecking.

Upstream pkg/controller/validatingadmissionpolicystatus/controller.go on our runtime:
- every policy added or updated queues its name (policies are cluster-scoped);
- a sync does nothing when the policy is gone or `metadata.generation <=
  status.observedGeneration` (so its own status write, which leaves the generation alone,
  settles it);
- else it type-checks the policy (`typecheck.check`) and applies the status subresource
  (server-side apply, field manager upstream's `validatingadmissionpolicy-status`, forced)
  with the generation it saw and the warnings, an empty list when there are none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache

from kcm_controllers.vapstatus import policy, typecheck

log = logging.getLogger("kcm.vapstatus")

FIELD_MANAGER = "validatingadmissionpolicy-status"  # upstream's ControllerName


class StatusController:
    """Handlers and sync; the API client and the checker's schema source are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        policies: cache.Cache[policy.PolicyView],
        enqueue: Callable[[str], None],
        checker: typecheck.TypeChecker,
    ) -> None:
        self.client = client
        self.policies = policies
        self.enqueue = enqueue
        self.checker = checker

    def register(self) -> None:
        self.policies.add_handler(
            on_add=self._queue, on_update=lambda _old, new: self._queue(new), on_delete=None
        )

    def _queue(self, view: policy.PolicyView) -> None:
        if view.metadata.name:
            self.enqueue(view.metadata.name)

    async def sync(self, name: str) -> runtime.Result | None:
        view = self.policies.get("", name)
        if view is None or view.metadata.generation <= view.status.observed_generation:
            return None
        warnings = await self.checker.check(view)
        path = kubeclient.resource_path(
            policy.POLICIES.group,
            policy.POLICIES.version,
            policy.POLICIES.resource,
            name=name,
            subresource="status",
        )
        try:
            await self.client.patch(
                path,
                policy.status_apply(view, warnings),
                "apply",
                params={"fieldManager": FIELD_MANAGER, "force": "true"},
            )
        except kubeclient.ApiError as exc:
            if exc.not_found:
                return None
            raise
        log.debug(
            "policy status written",
            extra={"policy": name, "observedGeneration": view.metadata.generation, "warnings": len(warnings)},
        )
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    sc = StatusController(
        ctx.client, ctx.caches[policy.POLICIES], ctx.enqueue, typecheck.TypeChecker(ctx.client)
    )
    sc.register()
    return sc.sync


SPEC = runtime.Spec(
    name="validatingadmissionpolicy-status-controller",
    alias="validatingadmissionpolicy-status-controller",  # upstream gives it no alias
    primary=policy.POLICIES,
    views={policy.POLICIES: policy.PolicyView},
    build=build,
    workers=5,  # upstream's --concurrent-validating-admission-policy-status-syncs
    workers_flag="concurrent-validating-admission-policy-status-syncs",
    queue_name="validatingadmissionpolicy-status",
    package=__package__,
)
