"""kcm_shared.apimachinery.apitypes: typed semantic equality as Go's apiequality.Semantic.DeepEqual sees it."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_shared.apimachinery import apitypes

POD_SPEC = "k8s.io.api.core.v1.PodSpec"
C = {"name": "c", "image": "nginx"}


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        # nil and empty slices and maps are equal; absent, null and a plain field's zero too.
        ({"containers": [C]}, {"containers": [C], "volumes": [], "nodeSelector": {}}, True),
        ({"containers": [C]}, {"containers": [C], "volumes": None, "hostPID": False}, True),
        ({"containers": [C]}, {"containers": [C, C]}, False),
        # Pointers: absent differs from zero and from an empty struct.
        ({"containers": [C]}, {"containers": [C], "priority": 0}, False),
        ({"containers": [C], "priority": 0}, {"containers": [C], "priority": 0}, True),
        ({"containers": [C]}, {"containers": [C], "securityContext": {}}, False),
        # An inline struct (Volume.volumeSource) is compared in place; its members are pointers.
        ({"volumes": [{"name": "v"}]}, {"volumes": [{"name": "v", "emptyDir": {}}]}, False),
        ({"volumes": [{"name": "v", "emptyDir": {}}]}, {"volumes": [{"name": "v", "emptyDir": {}}]}, True),
        (
            {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]},
            {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1024Mi"}}]},
            True,
        ),
        # IntOrString: the kind matters, absent is the int 0.
        (
            {"containers": [{**C, "livenessProbe": {"httpGet": {"port": 80}}}]},
            {"containers": [{**C, "livenessProbe": {"httpGet": {"port": "80"}}}]},
            False,
        ),
        (
            {"containers": [{**C, "livenessProbe": {"httpGet": {}}}]},
            {"containers": [{**C, "livenessProbe": {"httpGet": {"port": 0}}}]},
            True,
        ),
    ],
)
def test_semantic_equal_pod_spec(a: dict[str, Any], b: dict[str, Any], equal: bool) -> None:
    assert apitypes.semantic_equal(POD_SPEC, a, b) is equal
    assert apitypes.semantic_equal(POD_SPEC, b, a) is equal


def test_times_compare_by_instant() -> None:
    meta = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert apitypes.semantic_equal(meta, {"creationTimestamp": None}, {})
    assert apitypes.semantic_equal(
        meta,
        {"creationTimestamp": "2024-01-01T00:00:00Z"},
        {"creationTimestamp": "2024-01-01T01:00:00+01:00"},
    )
    assert not apitypes.semantic_equal(meta, {"creationTimestamp": "2024-01-01T00:00:00Z"}, {})


def test_unknown_type_is_refused() -> None:
    with pytest.raises(KeyError):
        apitypes.semantic_equal("no.such.Type", {}, {})
