"""The volume controllers' pod view: upstream's volumeutil.IsPodTerminated and the claims a pod names."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_shared.controllerutil import podvolumes

RUNNING = {"state": {"running": {}}}
STOPPED = {"state": {"terminated": {}}}
DELETED = {"deletionTimestamp": "2026-01-01T00:00:00Z"}


def _pod(meta: dict[str, Any] | None = None, **status: Any) -> podvolumes.PodView:
    return msgspec.convert({"metadata": {"name": "p", **(meta or {})}, "status": status}, podvolumes.PodView)


@pytest.mark.parametrize(
    ("pod", "terminated"),
    [
        (_pod(phase="Succeeded"), True),
        (_pod(phase="Failed"), True),
        (_pod(phase="Running", containerStatuses=[RUNNING]), False),
        (_pod(DELETED, phase="Running", containerStatuses=[RUNNING]), False),
        (_pod(DELETED, phase="Running", containerStatuses=[STOPPED]), True),
        # Every kind of container counts: a running init or ephemeral container keeps it alive.
        (_pod(DELETED, initContainerStatuses=[RUNNING], containerStatuses=[STOPPED]), False),
        (_pod(DELETED, ephemeralContainerStatuses=[RUNNING], containerStatuses=[STOPPED]), False),
        (_pod(DELETED), True),
    ],
)
def test_is_terminated(pod: podvolumes.PodView, terminated: bool) -> None:
    assert podvolumes.is_terminated(pod) is terminated


def test_claim_names_include_the_ephemeral_volumes_claims() -> None:
    pod = msgspec.convert(
        {
            "metadata": {"name": "web"},
            "spec": {
                "volumes": [
                    {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                    {"name": "cfg", "configMap": {"name": "c"}},
                ]
            },
        },
        podvolumes.PodView,
    )
    assert podvolumes.claim_names(pod) == ["data", "web-scratch"]
