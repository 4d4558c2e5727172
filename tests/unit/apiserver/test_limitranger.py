"""The embedded server's LimitRanger admission (kcm_apiserver.limitranger) and the LimitRange
object's validation (validation.limitranges); kube-apiserver's texts, compared against it in
tests/e2e/test_apiserver_parity.py."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver import errors, limitranger, validation
from kcm_apiserver.registry import Registry, ResourceType
from kcm_apiserver.store import Store
from kcm_apiserver.validation.fielderrors import go_quantity

Obj = dict[str, Any]


def rt(resource: str) -> ResourceType:
    found = Registry().lookup("", "v1", resource)
    assert found is not None
    return found


def store_with(*limits: Obj, name: str = "lr") -> Store:
    store = Store()
    store.put(
        limitranger.LIMIT_RANGES_KEY,
        {"metadata": {"name": name, "namespace": "ns"}, "spec": {"limits": list(limits)}},
    )
    return store


def pod(*containers: Obj, inits: tuple[Obj, ...] = ()) -> Obj:
    spec: Obj = {"containers": list(containers)}
    if inits:
        spec["initContainers"] = list(inits)
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def container(name: str, **resources: dict[str, str]) -> Obj:
    return {"name": name, "image": "nginx", "resources": resources}


CONTAINER = {
    "type": "Container",
    "max": {"cpu": "1"},
    "min": {"cpu": "100m"},
    "default": {"cpu": "500m", "memory": "256Mi"},
    "defaultRequest": {"cpu": "200m", "memory": "128Mi"},
    "maxLimitRequestRatio": {"cpu": "4"},
}


def refusal(store: Store, obj: Obj, resource: str = "pods", old: Obj | None = None) -> str:
    with pytest.raises(errors.ApiError) as refused:
        limitranger.validate(store, rt(resource), obj, old)
    assert refused.value.code == 403
    return str(refused.value.status()["message"])


def test_defaults_fill_what_each_container_leaves_out_and_say_so() -> None:
    obj = pod(
        container("a"),
        container("b", limits={"cpu": "800m"}, requests={"cpu": "800m"}),
        inits=(container("i"),),
    )
    limitranger.admit_create(store_with(CONTAINER), rt("pods"), obj)
    a, b = obj["spec"]["containers"]
    assert a["resources"] == {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert b["resources"] == {
        "requests": {"cpu": "800m", "memory": "128Mi"},
        "limits": {"cpu": "800m", "memory": "256Mi"},
    }
    assert obj["spec"]["initContainers"][0]["resources"]["limits"] == {"cpu": "500m", "memory": "256Mi"}
    assert obj["metadata"]["annotations"][limitranger.ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; "
        "memory request for container b; memory limit for container b; "
        "cpu, memory request for init container i; cpu, memory limit for init container i"
    )
    # Nothing to default: no annotation.
    untouched = pod(
        container("a", limits={"cpu": "1", "memory": "1Gi"}, requests={"cpu": "1", "memory": "1Gi"})
    )
    limitranger.admit_create(store_with(CONTAINER), rt("pods"), untouched)
    assert "annotations" not in untouched["metadata"]


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}},
            "maximum cpu usage per Container is 1, but limit is 2",
        ),
        (
            {"limits": {"cpu": "200m"}, "requests": {"cpu": "50m"}},
            "minimum cpu usage per Container is 100m, but request is 50m",
        ),
        (
            {"requests": {"cpu": "200m"}},
            "[maximum cpu usage per Container is 1.  No limit is specified, "
            "cpu max limit to request ratio per Container is 4, but no limit is specified or limit is 0]",
        ),
        (
            {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}},
            "cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000",
        ),
    ],
)
def test_container_constraints(resources: Obj, message: str) -> None:
    assert (
        refusal(store_with(CONTAINER), pod(container("c", **resources)))
        == f'pods "p" is forbidden: {message}'
    )


def test_several_reasons_are_listed_and_fitting_pods_pass() -> None:
    store = store_with({"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}})
    both = pod(container("c", limits={"cpu": "2", "memory": "2Gi"}))
    assert refusal(store, both) == (
        'pods "p" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, '
        "maximum memory usage per Container is 1Gi, but limit is 2Gi]"
    )
    limitranger.validate(store, rt("pods"), pod(container("c", limits={"cpu": "1", "memory": "1Gi"})), None)
    # Pod updates are not checked: their resources cannot change.
    limitranger.validate(store, rt("pods"), both, both)


def test_a_pod_item_bounds_the_sum_of_the_containers() -> None:
    store = store_with({"type": "Pod", "max": {"memory": "2Gi"}})
    big = pod(container("a", limits={"memory": "1Gi"}), container("b", limits={"memory": "1536Mi"}))
    assert (
        refusal(store, big)
        == 'pods "p" is forbidden: maximum memory usage per Pod is 2Gi, but limit is 2560Mi'
    )
    # An init container counts where it alone asks for more than the containers together.
    init = pod(container("a", limits={"memory": "1Gi"}), inits=(container("i", limits={"memory": "3Gi"}),))
    assert refusal(store, init).endswith("maximum memory usage per Pod is 2Gi, but limit is 3Gi")


def test_claims_are_bounded_by_their_request() -> None:
    store = store_with(
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}}
    )

    def claim(size: str) -> Obj:
        return {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"resources": {"requests": {"storage": size}}},
        }

    prefix = 'persistentvolumeclaims "c" is forbidden: '
    assert refusal(store, claim("500Mi"), "persistentvolumeclaims") == (
        prefix + "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
    )
    assert refusal(store, claim("10Gi"), "persistentvolumeclaims", old=claim("2Gi")) == (
        prefix + "maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
    )
    limitranger.validate(store, rt("persistentvolumeclaims"), claim("2Gi"), None)


def causes(*limits: Obj) -> list[tuple[str, str]]:
    obj = {"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": list(limits)}}
    return [(c["field"], c["message"]) for c in validation.validate("", "LimitRange", obj, None)]


def test_limit_range_validation() -> None:
    two = go_quantity("2")
    assert causes({"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}) == [
        ("spec.limits[0].min[cpu]", f"Invalid value: {two}: min value 2 is greater than max value 1")
    ]
    assert causes({"type": "Pod", "default": {"cpu": "1"}}) == [
        ("spec.limits[0].default", "Forbidden: may not be specified when `type` is 'Pod'")
    ]
    assert causes({"type": "PersistentVolumeClaim"}) == [
        (
            "spec.limits[0].limits",
            "Required value: either minimum or maximum storage value is required, but neither was provided",
        )
    ]
    assert causes({"type": "Pod"}, {"type": "Pod"}) == [("spec.limits[1].type", 'Duplicate value: "Pod"')]
    assert causes({"type": "Nope"}) == [
        ("spec.limits[0].type", 'Invalid value: "Nope": must be a standard limit type or fully qualified')
    ]
    assert causes({"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}) == [
        (
            "spec.limits[0].maxLimitRequestRatio[cpu]",
            f"Invalid value: {go_quantity('500m')}: ratio 500m is less than 1",
        )
    ]
    assert causes(
        {"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "3"}}
    ) == [
        (
            "spec.limits[0].maxLimitRequestRatio[cpu]",
            f"Invalid value: {go_quantity('3')}: ratio 3 is greater than max/min = 2.000000",
        )
    ]


@pytest.mark.parametrize(
    ("text", "amount", "cached", "form"),
    [
        ("2", "value:2, scale:0", "2", "DecimalSI"),
        ("500m", "value:500, scale:-3", "500m", "DecimalSI"),
        ("1Gi", "value:1073741824, scale:0", "1Gi", "BinarySI"),
        ("0.5", "value:5, scale:-1", "", "DecimalSI"),
    ],
)
def test_quantities_print_as_go_dumps_the_struct(text: str, amount: str, cached: str, form: str) -> None:
    assert go_quantity(text) == (
        f"resource.Quantity{{i:resource.int64Amount{{{amount}}}, d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, "
        f's:"{cached}", Format:"{form}"}}'
    )
