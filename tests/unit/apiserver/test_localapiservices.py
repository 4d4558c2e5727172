"""The local APIServices the embedded API server registers at start, as kube-apiserver's
aggregator does (tests/e2e/test_apiserver_parity.py compares them with kube-apiserver's)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver import errors, tables
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store


@pytest.fixture
def api() -> Api:
    return Api(Store(), Registry(), clock=lambda: "2026-01-01T00:00:00Z")


def ctx(api: Api) -> Ctx:
    rt = api.registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
    assert rt is not None
    return Ctx(rt)


def test_every_served_group_version_has_an_available_local_apiservice(api: Api) -> None:
    listed = {o["metadata"]["name"]: o for o in api.list_objects(ctx(api), "", "", 0, "").items}
    assert {"v1.", "v1.apps", "v1.autoscaling", "v2.autoscaling", "v1.batch"} <= set(listed)
    assert "v1.apiregistration.k8s.io" not in listed  # kube-apiserver lists none for its own group
    apps = listed["v1.apps"]
    assert apps["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert apps["spec"] == {
        "group": "apps",
        "version": "v1",
        "groupPriorityMinimum": 17800,
        "versionPriority": 15,
    }
    assert listed["v1."]["spec"] == {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert apps["status"]["conditions"] == [
        {
            "type": "Available",
            "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "Local",
            "message": "Local APIServices are always available",
        }
    ]


def test_a_restart_keeps_the_stored_ones(api: Api) -> None:
    before = api.get(ctx(api), "v1.apps")["metadata"]["uid"]
    again = Api(api.store, Registry())
    assert again.get(ctx(again), "v1.apps")["metadata"]["uid"] == before


def test_an_apiservice_name_is_version_dot_group(api: Api) -> None:
    spec = {"group": "x.io", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}
    with pytest.raises(errors.ApiError) as err:
        api.create(ctx(api), {"kind": "APIService", "metadata": {"name": "v2.x.io"}, "spec": spec})
    assert err.value.message == (
        'APIService.apiregistration.k8s.io "v2.x.io" is invalid: metadata.name: Invalid value: "v2.x.io": '
        'must be `spec.version+"."+spec.group`: "v1.x.io"'
    )
    assert api.create(ctx(api), {"kind": "APIService", "metadata": {"name": "v1.x.io"}, "spec": spec})


@pytest.mark.parametrize(
    ("spec", "conditions", "cells"),
    [
        ({}, [{"type": "Available", "status": "True", "reason": "Local"}], ["Local", "True"]),
        (
            {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}],
            ["kube-system/metrics-server", "False (FailedDiscoveryCheck)"],
        ),
        ({}, [], ["Local", "Unknown"]),
    ],
)
def test_kubectl_get_apiservices_columns(
    spec: dict[str, Any], conditions: list[dict[str, str]], cells: list[str]
) -> None:
    obj = {"metadata": {"name": "v1.x"}, "spec": spec, "status": {"conditions": conditions}}
    row = tables.to_table("apiregistration.k8s.io", "APIService", [obj])["rows"][0]["cells"]
    assert row[1:3] == cells
