"""The legacy token cleaner's pass against the testing kit's fake client (upstream's
TestLegacyServiceAccountTokenCleanUp cases in legacy_serviceaccount_token_cleaner_test.go)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from kcm_controllers.legacytokencleaner import controller as cleaner
from kcm_controllers.legacytokencleaner import podsecrets
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil.serviceaccounts import (
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
    SecretView,
    ServiceAccountView,
)
from kcm_shared.testing import caches, fakeclient

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
PERIOD = 365 * 24 * 3600.0
DAY = dt.timedelta(days=1)
OLD = NOW - dt.timedelta(days=400)  # created more than a period ago
TRACKED = (NOW - dt.timedelta(days=500)).date().isoformat()


def _date(moment: dt.datetime) -> str:
    return moment.date().isoformat()


def _secret(
    *,
    created: dt.datetime = OLD,
    deleting: bool = False,
    type_: str = "kubernetes.io/service-account-token",
    labels: dict[str, str] | None = None,
    sa: str = "default",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "token-secret-1",
        "namespace": "default",
        "uid": "secret-uid",
        "resourceVersion": "7",
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "annotations": {
            "kubernetes.io/service-account.name": sa,
            "kubernetes.io/service-account.uid": "sa-uid",
        },
        "labels": labels or {},
    }
    if deleting:
        meta["deletionTimestamp"] = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": meta, "type": type_}


def _sa(referenced: bool = True) -> dict[str, Any]:
    secrets = [{"name": "token-secret-1"}] if referenced else []
    return {"metadata": {"name": "default", "namespace": "default", "uid": "sa-uid"}, "secrets": secrets}


def _pod(mounts: bool) -> dict[str, Any]:
    volumes = [{"name": "t", "secret": {"secretName": "token-secret-1"}}] if mounts else []
    return {"metadata": {"name": "pod-1", "namespace": "default"}, "spec": {"volumes": volumes}}


TRACKING_PATH = f"/api/v1/namespaces/{cleaner.TRACKING_NAMESPACE}/configmaps/{cleaner.TRACKING_CONFIGMAP}"
PATH = "/api/v1/namespaces/default/secrets/token-secret-1"


def _run(
    secret: dict[str, Any],
    sa: dict[str, Any] | None,
    pod: dict[str, Any] | None,
    configmap: dict[str, Any] | None,
) -> list[tuple[str, str, Any]]:
    """One pass over the caches holding `secret`, `sa` and `pod`; the writes it made."""
    secrets = caches.new(SECRETS, SecretView, [secret])
    sas = caches.new(SERVICEACCOUNTS, ServiceAccountView, [sa] if sa is not None else [])
    pods = caches.new(PODS, podsecrets.PodSecretsView, [pod] if pod is not None else [])
    client = fakeclient.FakeClient(
        {PATH: secret, **({TRACKING_PATH: configmap} if configmap is not None else {})}
    )
    pass_ = cleaner.Cleaner(client, secrets, sas, pods, PERIOD, now=lambda: NOW)
    asyncio.run(pass_.evaluate())
    return client.calls(*fakeclient.WRITES)


TRACKING = {"data": {"since": TRACKED}}
LABELLED = [
    ("patch", PATH, {"metadata": {"uid": "secret-uid", "labels": {cleaner.INVALID_SINCE_LABEL: _date(NOW)}}})
]
DELETED = [("delete", PATH, {"preconditions": {"resourceVersion": "7"}})]


@pytest.mark.parametrize(
    ("case", "secret", "sa", "pod", "configmap", "writes"),
    [
        ("tracked for less than a period", _secret(), _sa(), None, {"data": {"since": _date(NOW - DAY)}}, []),
        ("not a token Secret", _secret(type_="Opaque"), _sa(), None, TRACKING, []),
        ("not referenced by its ServiceAccount", _secret(), _sa(referenced=False), None, TRACKING, []),
        ("ServiceAccount gone", _secret(), None, None, TRACKING, []),
        ("created within the period", _secret(created=NOW - DAY), _sa(), None, TRACKING, []),
        ("being deleted", _secret(deleting=True), _sa(), None, TRACKING, []),
        (
            "used within the period",
            _secret(labels={cleaner.LAST_USED_LABEL: _date(NOW - DAY)}),
            _sa(),
            None,
            TRACKING,
            [],
        ),
        (
            "last used on the first day of the period: kept",
            _secret(labels={cleaner.LAST_USED_LABEL: _date(NOW - dt.timedelta(seconds=PERIOD))}),
            _sa(),
            None,
            TRACKING,
            [],
        ),
        (
            "last-used unparseable",
            _secret(labels={cleaner.LAST_USED_LABEL: "2022/12/1"}),
            _sa(),
            None,
            TRACKING,
            [],
        ),
        ("mounted by a pod", _secret(), _sa(), _pod(mounts=True), TRACKING, []),
        ("unused, not mounted: invalidated", _secret(), _sa(), _pod(mounts=False), TRACKING, LABELLED),
        (
            "last used before the period: invalidated",
            _secret(labels={cleaner.LAST_USED_LABEL: _date(NOW - dt.timedelta(days=400))}),
            _sa(),
            None,
            TRACKING,
            LABELLED,
        ),
        (
            "invalid-since unparseable: labelled again",
            _secret(labels={cleaner.INVALID_SINCE_LABEL: "2022/12/1"}),
            _sa(),
            None,
            TRACKING,
            LABELLED,
        ),
        (
            "invalid since within the period: kept",
            _secret(labels={cleaner.INVALID_SINCE_LABEL: _date(NOW - DAY)}),
            _sa(),
            None,
            TRACKING,
            [],
        ),
        (
            "invalid since the first day of the period: kept",
            _secret(labels={cleaner.INVALID_SINCE_LABEL: _date(NOW - dt.timedelta(seconds=PERIOD))}),
            _sa(),
            None,
            TRACKING,
            [],
        ),
        (
            "invalid for a period: deleted",
            _secret(labels={cleaner.INVALID_SINCE_LABEL: _date(NOW - dt.timedelta(days=366))}),
            _sa(),
            None,
            TRACKING,
            DELETED,
        ),
    ],
)
def test_pass(
    case: str,
    secret: dict[str, Any],
    sa: dict[str, Any] | None,
    pod: dict[str, Any] | None,
    configmap: dict[str, Any],
    writes: list[tuple[str, str, Any]],
) -> None:
    assert _run(secret, sa, pod, configmap) == writes, case


@pytest.mark.parametrize(
    ("configmap", "error"),
    [
        (None, kubeclient.ApiError),
        ({"data": {}}, ValueError),
        ({"data": {"since": "2022/12/1"}}, ValueError),
    ],
)
def test_no_tracking_date_fails_the_pass(configmap: dict[str, Any] | None, error: type[Exception]) -> None:
    with pytest.raises(error):
        _run(_secret(), _sa(), None, configmap)
