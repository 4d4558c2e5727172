"""Deployments and replica sets as views, like upstream's newDeployment / newReplicaSet test
helpers, for the deployment tests (tests/unit/controllers/deployment/)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
from kcm_controllers.deployment import views
from kcm_shared.apimachinery import codec

T0 = dt.datetime(2016, 5, 20, 0, 0, tzinfo=dt.UTC)
OLDER, OLD, NEW = T0, T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=2)


def deployment(
    replicas: int = 1,
    surge: int | str | None = 0,
    unavailable: int | str | None = 0,
    *,
    strategy: str = views.ROLLING_UPDATE,
    history: int | None = None,
    deadline: int | None = None,
    paused: bool = False,
    status: views.DeploymentStatus | None = None,
    generation: int = 0,
) -> views.Deployment:
    """Like upstream's newDeployment helper: maxSurge and maxUnavailable default to 0."""
    return views.Deployment(
        metadata=codec.ObjectMeta(name="foo", namespace="default", uid="d-uid", generation=generation),
        spec=views.DeploymentSpec(
            replicas=replicas,
            selector={"matchLabels": {"foo": "bar"}},
            strategy=views.Strategy(strategy, views.RollingUpdate(unavailable, surge)),
            revision_history_limit=history,
            paused=paused,
            progress_deadline_seconds=deadline,
        ),
        status=status or views.DeploymentStatus(),
    )


def rs(
    name: str,
    replicas: int,
    created: dt.datetime = T0,
    *,
    available: int = 0,
    actual: int = 0,
    annotations: dict[str, str] | None = None,
    template: dict[str, Any] | None = None,
) -> views.ReplicaSet:
    return views.ReplicaSet(
        metadata=codec.ObjectMeta(
            name=name,
            namespace="default",
            uid=f"{name}-uid",
            creation_timestamp=created,
            annotations=annotations or {},
        ),
        spec=views.ReplicaSetSpec(
            replicas=replicas, template=msgspec.Raw(msgspec.json.encode(template or {}))
        ),
        status=views.ReplicaSetStatus(replicas=actual, available_replicas=available),
    )
