"""kcm_shared.apis.quota: quantities, resource-list arithmetic, evaluators and admission, with
upstream's table cases (apimachinery quantity_test.go, apiserver quota/v1 resources_test.go,
pkg/quota/v1/evaluator/core pods_test.go / services_test.go / persistent_volume_claims_test.go,
admission resourcequota admission_test.go)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_apiserver import validation
from kcm_shared.apimachinery import quantity
from kcm_shared.apimachinery.quantity import Quantity
from kcm_shared.apis.quota import admission, evaluators, resources, views

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def q(text: str) -> Quantity:
    return quantity.parse(text)


def rl(**items: str) -> dict[str, Quantity]:
    return {name.replace("_", "."): q(value) for name, value in items.items()}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0", "0"),
        ("1", "1"),
        ("1000m", "1"),
        ("100m", "100m"),
        ("0.1", "100m"),
        ("1.5", "1500m"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("1000000", "1M"),
        ("0.0001", "100u"),
        ("0.5n", "1n"),
        ("1n", "1n"),
        ("1Ki", "1Ki"),
        ("1.5Gi", "1536Mi"),
        ("1.5Ki", "1536"),
        ("1024Mi", "1Gi"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("12e6", "12e6"),
        ("-100m", "-100m"),
        ("+1", "1"),
        (".5", "500m"),
    ],
)
def test_quantity_prints_upstreams_canonical_form(text: str, canonical: str) -> None:
    assert str(q(text)) == canonical


@pytest.mark.parametrize("text", ["", "1.0.0", "1K", "abc", "1 Gi", "--1", "1e", "Mi"])
def test_quantity_rejects_what_upstream_rejects(text: str) -> None:
    with pytest.raises(quantity.QuantityError):
        q(text)


def test_quantity_arithmetic_keeps_the_left_format_unless_it_is_zero() -> None:
    assert str(q("1Gi") + q("512Mi")) == "1536Mi"
    assert str(quantity.ZERO + q("128Mi")) == "128Mi"
    assert str(q("100m") + q("1")) == "1100m"
    assert str(q("1") - q("1500m")) == "-500m"
    assert q("1Ki").cmp(q("1024")) == 0
    assert q("1.5").round_up_to_units() == q("2")


def test_resources_add_and_subtract() -> None:
    # resources_test.go TestAdd / TestSubtract
    assert resources.equals(resources.add(rl(cpu="100m"), rl(cpu="100m")), rl(cpu="200m"))
    assert resources.equals(resources.add(rl(cpu="100m"), rl(memory="1Gi")), rl(cpu="100m", memory="1Gi"))
    assert resources.equals(resources.subtract(rl(cpu="100m"), rl(cpu="100m")), rl(cpu="0"))
    assert resources.equals(resources.subtract({}, rl(cpu="100m")), rl(cpu="-100m"))
    assert resources.equals(
        resources.subtract_non_negative(rl(cpu="100m", memory="1"), rl(cpu="200m", pods="1")),
        rl(cpu="0", memory="1", pods="0"),
    )


@pytest.mark.parametrize(
    ("a", "b", "fits", "exceeded"),
    [
        ({}, {}, True, []),
        (rl(cpu="100m"), rl(cpu="100m"), True, []),
        (rl(cpu="100m"), rl(cpu="50m"), False, ["cpu"]),
        (rl(cpu="100m", memory="1Gi"), rl(memory="2Gi"), True, []),
        (rl(memory="3Gi"), rl(cpu="1", memory="2Gi"), False, ["memory"]),
    ],
)
def test_resources_less_than_or_equal(a: Any, b: Any, fits: bool, exceeded: list[str]) -> None:
    assert resources.less_than_or_equal(a, b) == (fits, exceeded)


def test_resources_sets_and_masks() -> None:
    assert resources.mask(rl(cpu="1", memory="1", pods="1"), ["cpu", "pods"]).keys() == {"cpu", "pods"}
    assert resources.is_negative(rl(cpu="-1", memory="1")) == ["cpu"]
    assert resources.remove_zeros(rl(cpu="0", memory="1")).keys() == {"memory"}
    assert resources.is_zero(rl(cpu="0"))
    assert resources.intersection(["a", "b", "a"], ["a", "c"]) == ["a"]
    assert resources.difference(["a", "b"], ["a"]) == ["b"]
    assert resources.pretty(rl(memory="1Gi", cpu="500m")) == "cpu=500m,memory=1Gi"


def pod(**spec: Any) -> views.PodView:
    body: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    status = spec.pop("status", None)
    if status:
        body["status"] = status
    meta = spec.pop("metadata", None)
    if meta:
        body["metadata"].update(meta)
    return msgspec.convert(body, views.PodView, strict=False)


def container(name: str = "c", requests: Any = None, limits: Any = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def usage(obj: Any, evaluator: evaluators.Evaluator = evaluators.PODS_EVALUATOR) -> dict[str, str]:
    return resources.to_json(evaluator.usage(obj, NOW))


def test_pod_usage_sums_containers_and_takes_the_init_maximum() -> None:
    # pods_test.go "init container CPU/memory", "container CPU/memory", "init container maximums override sum"
    p = pod(
        containers=[
            container("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"}),
            container("b", {"cpu": "1"}, {"cpu": "2"}),
        ],
        initContainers=[container("i", {"cpu": "3", "memory": "100Mi"}, {"cpu": "4"})],
    )
    assert usage(p) == {
        "count/pods": "1",
        "cpu": "3",
        "limits.cpu": "4",
        "memory": "1Gi",
        "pods": "1",
        "requests.cpu": "3",
        "requests.memory": "1Gi",
    }


def test_pod_usage_adds_sidecars_overhead_hugepages_and_extended_resources() -> None:
    p = pod(
        containers=[container("a", {"cpu": "1", "hugepages-2Mi": "2Mi", "example.com/gpu": "1"})],
        initContainers=[container("s", {"cpu": "500m"}, restartPolicy="Always")],
        overhead={"cpu": "100m"},
    )
    used = usage(p)
    assert used["requests.cpu"] == "1600m"
    assert used["hugepages-2Mi"] == used["requests.hugepages-2Mi"] == "2Mi"
    assert used["requests.example.com/gpu"] == "1"


def test_a_terminal_pod_counts_only_in_count_pods() -> None:
    # pods_test.go: terminal pods are not charged for compute; count/pods counts every pod.
    done = pod(containers=[container("a", {"cpu": "1"})], status={"phase": "Succeeded"})
    assert usage(done) == {"count/pods": "1"}
    gone = pod(
        containers=[container("a", {"cpu": "1"})],
        metadata={"deletionTimestamp": "2023-12-31T23:00:00Z", "deletionGracePeriodSeconds": 30},
    )
    assert usage(gone) == {"count/pods": "1"}


def test_pod_constraints_name_each_missing_resource_and_container() -> None:
    # pods_test.go TestPodConstraintsFunc
    p = pod(containers=[container("c1", {"cpu": "1"}), container("c2")])
    required = ["limits.cpu", "requests.memory", "pods", "requests.storage"]
    assert (
        evaluators.pod_constraints(required, p)
        == "must specify limits.cpu for: c1,c2; requests.memory for: c1,c2"
    )
    assert evaluators.pod_constraints(["requests.cpu"], p) == "must specify requests.cpu for: c2"
    assert evaluators.pod_constraints(["pods", "ephemeral-storage"], p) is None


@pytest.mark.parametrize(
    ("scope", "operator", "values", "spec", "matches"),
    [
        ("BestEffort", "Exists", (), {"containers": [container()]}, True),
        ("BestEffort", "Exists", (), {"containers": [container(requests={"cpu": "1"})]}, False),
        ("BestEffort", "Exists", (), {"containers": [container(requests={"cpu": "0"})]}, True),
        ("NotBestEffort", "Exists", (), {"containers": [container(limits={"memory": "1Gi"})]}, True),
        ("Terminating", "Exists", (), {"activeDeadlineSeconds": 10}, True),
        ("Terminating", "Exists", (), {}, False),
        ("NotTerminating", "Exists", (), {}, True),
        ("PriorityClass", "In", ("high",), {"priorityClassName": "high"}, True),
        ("PriorityClass", "In", ("high",), {"priorityClassName": "low"}, False),
        ("PriorityClass", "NotIn", ("high",), {}, True),
        ("PriorityClass", "NotIn", ("high",), {"priorityClassName": "high"}, False),
        ("PriorityClass", "Exists", (), {"priorityClassName": "low"}, True),
        ("PriorityClass", "DoesNotExist", (), {"priorityClassName": "low"}, False),
        ("PriorityClass", "DoesNotExist", (), {}, True),
        (
            "CrossNamespacePodAffinity",
            "Exists",
            (),
            {
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"namespaces": ["x"]}]}
                }
            },
            True,
        ),
        (
            "CrossNamespacePodAffinity",
            "Exists",
            (),
            {
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"podAffinityTerm": {"namespaceSelector": {}}}
                        ]
                    }
                }
            },
            True,
        ),
        ("CrossNamespacePodAffinity", "Exists", (), {"affinity": {"podAffinity": {}}}, False),
    ],
)
def test_pod_scopes(scope: str, operator: str, values: tuple[str, ...], spec: Any, matches: bool) -> None:
    req = evaluators.Requirement(scope, operator, values)
    assert evaluators.pod_matches_scope(req, pod(**spec)) is matches


def service(kind: str, ports: int, **spec: Any) -> views.ServiceView:
    body = {"spec": {"type": kind, "ports": [{"port": 80 + i} for i in range(ports)], **spec}}
    return msgspec.convert(body, views.ServiceView, strict=False)


@pytest.mark.parametrize(
    ("svc", "expected"),
    [
        (service("ClusterIP", 1), {"services.loadbalancers": "0", "services.nodeports": "0"}),
        (service("NodePort", 2), {"services.loadbalancers": "0", "services.nodeports": "2"}),
        (service("LoadBalancer", 2), {"services.loadbalancers": "1", "services.nodeports": "2"}),
        (
            msgspec.convert(
                {
                    "spec": {
                        "type": "LoadBalancer",
                        "allocateLoadBalancerNodePorts": False,
                        "ports": [{"port": 1, "nodePort": 30001}, {"port": 2}],
                    }
                },
                views.ServiceView,
            ),
            {"services.loadbalancers": "1", "services.nodeports": "1"},
        ),
    ],
)
def test_service_usage(svc: views.ServiceView, expected: dict[str, str]) -> None:
    # services_test.go TestServiceEvaluatorUsage
    assert usage(svc, evaluators.SERVICES_EVALUATOR) == {"count/services": "1", "services": "1", **expected}


def test_claim_usage_charges_its_storage_class() -> None:
    # persistent_volume_claims_test.go TestPersistentVolumeClaimEvaluatorUsage
    claim = msgspec.convert(
        {"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "10.5"}}}},
        views.ClaimView,
    )
    assert usage(claim, evaluators.CLAIMS_EVALUATOR) == {
        "count/persistentvolumeclaims": "1",
        "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
        "gold.storageclass.storage.k8s.io/requests.storage": "11",
        "persistentvolumeclaims": "1",
        "requests.storage": "11",
    }
    assert evaluators.CLAIMS_EVALUATOR.matching_resources(
        ["gold.storageclass.storage.k8s.io/requests.storage", "cpu", "requests.storage"]
    ) == ["gold.storageclass.storage.k8s.io/requests.storage", "requests.storage"]


@pytest.mark.parametrize(
    ("request_", "allocated", "charged"),
    [
        ("10Gi", "12Gi", "12Gi"),  # lowered after a failed expansion: what was allocated counts
        ("12Gi", "10Gi", "12Gi"),  # an expansion under way: the request counts
        ("10Gi", None, "10Gi"),
    ],
)
def test_claim_usage_charges_allocated_storage_when_it_is_more(
    request_: str, allocated: str | None, charged: str
) -> None:
    # persistent_volume_claims_test.go, RecoverVolumeExpansionFailure (on by default in 1.32)
    doc: dict[str, Any] = {"spec": {"resources": {"requests": {"storage": request_}}}}
    if allocated is not None:
        doc["status"] = {"allocatedResources": {"storage": allocated}}
    claim = msgspec.convert(doc, views.ClaimView)
    assert usage(claim, evaluators.CLAIMS_EVALUATOR)["requests.storage"] == charged
    # RecoverVolumeExpansionFailure off: only the request counts.
    ungated = evaluators.Registry(allocated_claims=False).get("", "persistentvolumeclaims")
    assert usage(claim, ungated)["requests.storage"] == request_


def test_object_counts_and_legacy_names() -> None:
    configmaps = evaluators.REGISTRY.get("", "configmaps")
    assert usage(msgspec.convert({}, views.PodView), configmaps) == {
        "configmaps": "1",
        "count/configmaps": "1",
    }
    widgets = evaluators.REGISTRY.get("example.com", "widgets")
    assert widgets.names == ("count/widgets.example.com",)
    assert evaluators.parse_count_name("count/deployments.apps") == ("apps", "deployments")
    assert evaluators.parse_count_name("count/pods") == ("", "pods")
    assert evaluators.parse_count_name("pods") is None


def test_calculate_usage_counts_only_matching_pods_for_scoped_quotas() -> None:
    best_effort = pod(containers=[container()])
    burstable = pod(containers=[container(requests={"cpu": "1"})])
    hard = rl(pods="10", count_configmaps="3")
    hard = {"pods": q("10"), "count/configmaps": q("3")}

    def objects(e: evaluators.Evaluator) -> list[Any] | None:
        return [best_effort, burstable] if e.resource == "pods" else None

    assert resources.to_json(evaluators.calculate_usage(hard, [], objects, NOW)) == {"pods": "2"}
    scoped = evaluators.calculate_usage(hard, [evaluators.Requirement("BestEffort")], objects, NOW)
    assert resources.to_json(scoped) == {"pods": "1"}


def quota(name: str, hard: dict[str, str], used: dict[str, str] | None, **spec: Any) -> views.QuotaView:
    status: dict[str, Any] = {"hard": hard}
    if used is not None:
        status["used"] = used
    body = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": hard, **spec}, "status": status}
    return msgspec.convert(body, views.QuotaView)


def check(
    quotas: list[views.QuotaView], obj: Any, old: Any = None, evaluator: Any = None
) -> list[admission.Charge]:
    operation = evaluators.CREATE if old is None else evaluators.UPDATE
    return admission.check_request(
        quotas, evaluator or evaluators.PODS_EVALUATOR, operation, obj, old, now=NOW
    )


def test_admission_charges_and_refuses_past_the_limit() -> None:
    p = pod(containers=[container(requests={"cpu": "1"}, limits={"cpu": "2"})])
    charges = check(
        [quota("q", {"pods": "2", "requests.cpu": "2"}, {"pods": "1", "requests.cpu": "500m"})], p
    )
    assert [resources.to_json(c.used) for c in charges] == [{"pods": "2", "requests.cpu": "1500m"}]
    with pytest.raises(admission.Denied) as err:
        check([quota("q", {"pods": "2", "requests.cpu": "2"}, {"pods": "2", "requests.cpu": "1500m"})], p)
    assert str(err.value) == (
        "exceeded quota: q, requested: pods=1,requests.cpu=1, used: pods=2,requests.cpu=1500m, "
        "limited: pods=2,requests.cpu=2"
    )


def test_admission_status_unknown_and_failed_quota_messages() -> None:
    p = pod(containers=[container("c1")])
    with pytest.raises(admission.Denied, match=r"^status unknown for quota: q, resources: count/pods,pods$"):
        check([quota("q", {"pods": "2", "count/pods": "3"}, {"pods": "0"})], p)
    with pytest.raises(admission.Denied, match=r"^failed quota: q: must specify limits.cpu for: c1$"):
        check([quota("q", {"limits.cpu": "2"}, {"limits.cpu": "0"})], p)
    # A quota the controller has not written a status for limits nothing yet (upstream).
    assert check([msgspec.convert({"spec": {"hard": {"pods": "0"}}}, views.QuotaView)], p) == []


def test_a_best_effort_quota_does_not_refuse_a_burstable_pod() -> None:
    full = quota("be", {"pods": "1"}, {"pods": "1"}, scopes=["BestEffort"])
    assert check([full], pod(containers=[container(requests={"cpu": "1"}, limits={"cpu": "1"})])) == []
    with pytest.raises(admission.Denied, match="exceeded quota: be"):
        check([full], pod(containers=[container()]))


def test_admission_charges_only_the_growth_of_an_update() -> None:
    # admission_test.go TestAdmitBelowServiceQuotaLimit / service type changes
    quotas = [
        quota(
            "q",
            {"services.loadbalancers": "1", "services.nodeports": "2"},
            {"services.loadbalancers": "0", "services.nodeports": "1"},
        )
    ]
    old = msgspec.convert(
        {"metadata": {"resourceVersion": "5"}, "spec": {"type": "NodePort", "ports": [{"port": 1}]}},
        views.ServiceView,
    )
    new = msgspec.convert(
        {"metadata": {"resourceVersion": "5"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 1}]}},
        views.ServiceView,
    )
    charges = check(quotas, new, old, evaluators.SERVICES_EVALUATOR)
    assert [resources.to_json(c.used) for c in charges] == [
        {"services.loadbalancers": "1", "services.nodeports": "1"}
    ]
    two_ports = msgspec.convert(
        {
            "metadata": {"resourceVersion": "5"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 1}, {"port": 2}]},
        },
        views.ServiceView,
    )
    with pytest.raises(
        admission.Denied,
        match=r"^exceeded quota: q, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1$",
    ):
        check(
            [
                quota(
                    "q",
                    {"services.loadbalancers": "1", "services.nodeports": "1"},
                    {"services.loadbalancers": "0", "services.nodeports": "1"},
                )
            ],
            two_ports,
            old,
            evaluators.SERVICES_EVALUATOR,
        )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"hard": {"pods": "1", "services": "1"}, "scopes": ["BestEffort"]},
            "unsupported scope applied to resource",
        ),
        ({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]}, "unsupported scope applied to resource"),
        ({"hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}, "conflicting scopes"),
        ({"hard": {"pods": "1"}, "scopes": ["Weekend"]}, "unsupported scope"),
        ({"hard": {"pods": "1.5"}}, "must be an integer"),
        ({"hard": {"cpu": "-1"}}, "must be greater than or equal to 0"),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]
                },
            },
            "must be 'Exist' when scope is any of",
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]},
            },
            "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
        ),
    ],
)
def test_the_api_server_validates_quota_scopes_as_upstream(spec: dict[str, Any], message: str) -> None:
    # validation_test.go TestValidateResourceQuota
    obj = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "ns"},
        "spec": spec,
    }
    causes = validation.validate("", "ResourceQuota", obj, None)
    assert any(message in cause["message"] for cause in causes), causes


def test_valid_scoped_quotas_pass_validation() -> None:
    for spec in (
        {"hard": {"pods": "2", "requests.cpu": "1"}, "scopes": ["NotBestEffort", "Terminating"]},
        {"hard": {"pods": "2", "count/pods": "3"}, "scopes": ["BestEffort"]},
        {
            "hard": {"pods": "1"},
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
            },
        },
    ):
        obj = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": spec,
        }
        assert validation.validate("", "ResourceQuota", obj, None) == []
