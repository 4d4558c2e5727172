"""Object validation: which writes are rejected, on which field, with upstream's wording.

Objects go through `apply_defaults` first, as they do in the server.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from kcm_apiserver.defaults import apply_defaults
from kcm_apiserver.validation import validate
from kcm_apiserver.validation.batch import cron_schedule_error
from kcm_apiserver.validation.fielderrors import Cause, go_quote
from kcm_apiserver.validation.metav1 import delete_options, is_dns1035_label, patch_options, write_options
from kcm_shared.apimachinery.selectors import is_dns1123_label, is_dns1123_subdomain

from tests.support.validation import (
    SPECS,
    Mutator,
    Obj,
    check,
    fields,
    make,
)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_valid_objects_pass(kind: str) -> None:
    assert check(kind, make(kind)) == []


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_unchanged_update_passes(kind: str) -> None:
    old = make(kind)
    assert check(kind, copy.deepcopy(old), old) == []


def test_unknown_kinds_get_metadata_checks_only() -> None:
    obj = {"metadata": {"name": "Bad_Name", "namespace": "default"}, "spec": {"anything": True}}
    assert [c["field"] for c in validate("example.com", "Widget", obj, None)] == ["metadata.name"]
    assert validate("example.com", "Widget", {"metadata": {"name": "ok"}, "spec": 1}, None) == []


# --- exported name checks ------------------------------------------------------------------


def test_name_checks_are_exported() -> None:
    assert is_dns1123_subdomain("example.com") == []
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1035_label("1abc") != [] and is_dns1035_label("abc-1") == []


# --- metadata --------------------------------------------------------------------------------

SUBDOMAIN_ERROR = (
    'Invalid value: "Foo": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
    "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def test_bad_name_reads_like_upstream() -> None:
    assert check("Deployment", make("Deployment", "Foo")) == [
        ("FieldValueInvalid", "metadata.name", SUBDOMAIN_ERROR)
    ]


@pytest.mark.parametrize(
    ("kind", "name", "ok"),
    [
        ("Deployment", "web.v1", True),
        ("Deployment", "a" * 254, False),
        ("Namespace", "team-a", True),
        ("Namespace", "team.a", False),
        ("Service", "web-1", True),
        ("Service", "1web", False),
        ("Service", "web.a", False),
        ("Pod", "1web", True),
        ("Role", "system:controller:foo", True),
        ("Role", "a/b", False),
        ("ClusterRole", "..", False),
        ("ClusterRole", "Upper:Case", True),
        ("CronJob", "a" * 52, True),
        ("CronJob", "a" * 53, False),
    ],
)
def test_name_rules_per_kind(kind: str, name: str, ok: bool) -> None:
    errors = [f for f in fields(kind, make(kind, name)) if f[1] == "metadata.name"]
    assert (errors == []) is ok


def test_name_or_generate_name_is_required() -> None:
    pod = make("Pod", "")
    assert check("Pod", pod) == [
        ("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
    ]


@pytest.mark.parametrize(("prefix", "ok"), [("web-", True), ("web", True), ("Web-", False), ("-", False)])
def test_generate_name_is_checked_as_a_prefix(prefix: str, ok: bool) -> None:
    pod = make("Pod", "web-x1y2z")
    pod["metadata"]["generateName"] = prefix
    assert (fields("Pod", pod) == []) is ok


def test_namespace_rules_follow_scope() -> None:
    pod = make("Pod")
    del pod["metadata"]["namespace"]
    assert fields("Pod", pod) == [("FieldValueRequired", "metadata.namespace")]
    node = make("Node")
    node["metadata"]["namespace"] = "default"
    assert check("Node", node) == [
        ("FieldValueForbidden", "metadata.namespace", "Forbidden: not allowed on this type")
    ]
    pod["metadata"]["namespace"] = "Bad"
    assert fields("Pod", pod) == [("FieldValueInvalid", "metadata.namespace")]


@pytest.mark.parametrize(
    ("labels", "count"),
    [
        ({"app": "web", "example.com/tier": "front", "empty": ""}, 0),
        ({"bad key": "x"}, 1),
        ({"app": "bad value"}, 1),
        ({"app": "a" * 64}, 1),
        ({"/x": "y"}, 1),
    ],
)
def test_label_keys_and_values(labels: Obj, count: int) -> None:
    pod = make("Pod", mutate=lambda o: o["metadata"].update(labels=labels))
    assert fields("Pod", pod) == [("FieldValueInvalid", "metadata.labels")] * count


def test_annotations_keys_are_case_insensitive_and_total_size_is_limited() -> None:
    pod = make(
        "Pod", mutate=lambda o: o["metadata"].update(annotations={"Example.COM/Key": "any value at all"})
    )
    assert fields("Pod", pod) == []
    pod["metadata"]["annotations"] = {"bad key": "x"}
    assert fields("Pod", pod) == [("FieldValueInvalid", "metadata.annotations")]
    pod["metadata"]["annotations"] = {"big": "x" * (256 * 1024)}
    assert check("Pod", pod) == [
        ("FieldValueTooLong", "metadata.annotations", "Too long: may not be more than 262144 bytes")
    ]


def test_owner_references() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
    pod = make("Pod", mutate=lambda o: o["metadata"].update(ownerReferences=[ref]))
    assert fields("Pod", pod) == []
    pod["metadata"]["ownerReferences"] = [ref, {**ref, "name": "rs2"}, {"apiVersion": "v1", "kind": "Node"}]
    assert fields("Pod", pod) == [
        ("FieldValueInvalid", "metadata.ownerReferences"),
        ("FieldValueInvalid", "metadata.ownerReferences.name"),
        ("FieldValueInvalid", "metadata.ownerReferences.uid"),
    ]
    assert "Only one reference can have Controller set to true" in check("Pod", pod)[0][2]


@pytest.mark.parametrize("key", ["name", "namespace", "uid"])
def test_identity_metadata_is_immutable(key: str) -> None:
    old = make("ConfigMap")
    new = copy.deepcopy(old)
    new["metadata"][key] = "other"
    assert check("ConfigMap", new, old) == [
        ("FieldValueInvalid", f"metadata.{key}", 'Invalid value: "other": field is immutable')
    ]


def test_labels_may_change_on_update() -> None:
    old = make("Deployment")
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"new": "label"}
    assert check("Deployment", new, old) == []


# --- selectors and templates --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"])
def test_selector_must_match_template_labels(kind: str) -> None:
    obj = make(kind, mutate=lambda o: o["spec"].update(selector={"matchLabels": {"app": "other"}}))
    assert check(kind, obj) == [
        (
            "FieldValueInvalid",
            "spec.template.metadata.labels",
            'Invalid value: map[string]string{"app":"web"}: `selector` does not match template `labels`',
        )
    ]


@pytest.mark.parametrize(
    ("kind", "word"),
    [
        ("Deployment", "deployment"),
        ("ReplicaSet", "deployment"),
        ("StatefulSet", "statefulset"),
        ("DaemonSet", "daemonset"),
    ],
)
def test_empty_selector_is_invalid(kind: str, word: str) -> None:
    obj = make(kind, mutate=lambda o: o["spec"].update(selector={}))
    assert check(kind, obj) == [
        (
            "FieldValueInvalid",
            "spec.selector",
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
            f"MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}: empty selector is invalid for {word}",
        )
    ]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"])
def test_selector_is_required(kind: str) -> None:
    obj = make(kind, mutate=lambda o: o["spec"].pop("selector"))
    assert check(kind, obj) == [("FieldValueRequired", "spec.selector", "Required value")]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"key": "app", "operator": "In", "values": ["web"]}, []),
        ({"key": "app", "operator": "Exists"}, []),
        (
            {"key": "app", "operator": "In"},
            [("FieldValueRequired", "spec.selector.matchExpressions[0].values")],
        ),
        (
            {"key": "app", "operator": "Exists", "values": ["x"]},
            [("FieldValueForbidden", "spec.selector.matchExpressions[0].values")],
        ),
        (
            {"key": "app", "operator": "Gt", "values": ["1"]},
            [("FieldValueInvalid", "spec.selector.matchExpressions[0].operator")],
        ),
        (
            {"key": "bad key", "operator": "Exists"},
            [("FieldValueInvalid", "spec.selector.matchExpressions[0].key")],
        ),
        (
            {"key": "app", "operator": "In", "values": ["bad value"]},
            [("FieldValueInvalid", "spec.selector.matchExpressions[0].values[0]")],
        ),
    ],
)
def test_selector_expressions(expression: Obj, expected: list[tuple[str, str]]) -> None:
    deploy = make(
        "Deployment", mutate=lambda o: o["spec"].update(selector={"matchExpressions": [expression]})
    )
    assert fields("Deployment", deploy) == expected


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "DaemonSet"])
def test_workload_selector_is_immutable(kind: str) -> None:
    old = make(kind)
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert fields(kind, new, old) == [("FieldValueInvalid", "spec.selector")]
    assert check(kind, new, old)[0][2].endswith(": field is immutable")


@pytest.mark.parametrize(
    ("kind", "owner"),
    [
        ("Deployment", "ReplicaSet"),
        ("ReplicaSet", "ReplicaSet"),
        ("StatefulSet", "StatefulSet"),
        ("DaemonSet", "DaemonSet"),
    ],
)
def test_workload_templates_must_restart_always(kind: str, owner: str) -> None:
    obj = make(
        kind,
        mutate=lambda o: o["spec"]["template"]["spec"].update(restartPolicy="Never", activeDeadlineSeconds=5),
    )
    assert check(kind, obj) == [
        (
            "FieldValueNotSupported",
            "spec.template.spec.restartPolicy",
            'Unsupported value: "Never": supported values: "Always"',
        ),
        (
            "FieldValueForbidden",
            "spec.template.spec.activeDeadlineSeconds",
            f"Forbidden: activeDeadlineSeconds in {owner} is not Supported",
        ),
    ]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"])
def test_replicas_must_not_be_negative(kind: str) -> None:
    obj = make(kind, mutate=lambda o: o["spec"].update(replicas=-1))
    assert check(kind, obj) == [
        ("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0")
    ]


# --- pod specs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": []}, [("FieldValueRequired", "spec.containers")]),
        (
            {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]},
            [("FieldValueDuplicate", "spec.containers[1].name")],
        ),
        (
            {"initContainers": [{"name": "a", "image": "x"}], "containers": [{"name": "a", "image": "y"}]},
            [("FieldValueDuplicate", "spec.containers[0].name")],
        ),
        (
            {"containers": [{"name": "My_App", "image": "x"}]},
            [("FieldValueInvalid", "spec.containers[0].name")],
        ),
        ({"containers": [{"name": "", "image": "x"}]}, [("FieldValueRequired", "spec.containers[0].name")]),
        ({"containers": [{"name": "a"}]}, [("FieldValueRequired", "spec.containers[0].image")]),
        ({"containers": [{"name": "a", "image": " x"}]}, [("FieldValueInvalid", "spec.containers[0].image")]),
        (
            {"containers": [{"name": "a", "image": "x", "imagePullPolicy": "Sometimes"}]},
            [("FieldValueNotSupported", "spec.containers[0].imagePullPolicy")],
        ),
        (
            {"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 0}]}]},
            [("FieldValueInvalid", "spec.containers[0].ports[0].containerPort")],
        ),
        (
            {
                "containers": [
                    {"name": "a", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}
                ]
            },
            [("FieldValueNotSupported", "spec.containers[0].ports[0].protocol")],
        ),
        (
            {
                "containers": [
                    {
                        "name": "a",
                        "image": "x",
                        "ports": [
                            {"name": "http", "containerPort": 80},
                            {"name": "http", "containerPort": 81},
                        ],
                    }
                ]
            },
            [("FieldValueDuplicate", "spec.containers[0].ports[1].name")],
        ),
        (
            {"containers": [{"name": "a", "image": "x", "ports": [{"name": "80", "containerPort": 80}]}]},
            [("FieldValueInvalid", "spec.containers[0].ports[0].name")],
        ),
        (
            {
                "containers": [
                    {"name": "a", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}
                ]
            },
            [("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name")],
        ),
        (
            {
                "volumes": [{"name": "data"}, {"name": "data"}],
                "containers": [
                    {"name": "a", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}
                ],
            },
            [("FieldValueDuplicate", "spec.volumes[1].name")],
        ),
        (
            {"restartPolicy": "Sometimes", "containers": [{"name": "a", "image": "x"}]},
            [("FieldValueNotSupported", "spec.restartPolicy")],
        ),
        (
            {"dnsPolicy": "Custom", "containers": [{"name": "a", "image": "x"}]},
            [("FieldValueNotSupported", "spec.dnsPolicy")],
        ),
        (
            {"activeDeadlineSeconds": 0, "containers": [{"name": "a", "image": "x"}]},
            [("FieldValueInvalid", "spec.activeDeadlineSeconds")],
        ),
    ],
)
def test_pod_spec_rules(spec: Obj, expected: list[tuple[str, str]]) -> None:
    pod = make("Pod", mutate=lambda o: o.update(spec=spec))
    assert fields("Pod", pod) == expected


def test_template_errors_are_reported_under_the_template_path() -> None:
    deploy = make("Deployment", mutate=lambda o: o["spec"]["template"]["spec"]["containers"][0].pop("image"))
    assert check("Deployment", deploy) == [
        ("FieldValueRequired", "spec.template.spec.containers[0].image", "Required value")
    ]


def _pod_update(mutate: Mutator) -> list[tuple[str, str]]:
    old = make("Pod", mutate=lambda o: o["spec"].update(tolerations=[{"key": "a", "operator": "Exists"}]))
    new = copy.deepcopy(old)
    mutate(new)
    return fields("Pod", new, old)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda p: p["spec"]["containers"][0].update(image="nginx:1.26"), []),
        (lambda p: p["spec"].update(activeDeadlineSeconds=30), []),
        (lambda p: p["spec"]["tolerations"].append({"key": "b", "operator": "Exists"}), []),
        (lambda p: p["metadata"].update(labels={"x": "y"}), []),
        (lambda p: p["spec"].update(tolerations=[]), [("FieldValueForbidden", "spec")]),
        (lambda p: p["spec"]["containers"][0].update(name="other"), [("FieldValueForbidden", "spec")]),
        (lambda p: p["spec"].update(nodeName="node-1"), [("FieldValueForbidden", "spec")]),
        (
            lambda p: p["spec"]["containers"][0].update(image=""),
            [("FieldValueRequired", "spec.containers[0].image")],
        ),
    ],
)
def test_pod_update_rules(mutate: Mutator, expected: list[tuple[str, str]]) -> None:
    assert _pod_update(mutate) == expected


def test_pod_update_message_reads_like_upstream() -> None:
    old = make("Pod")
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    [(_, _, message)] = check("Pod", new, old)
    assert message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    )


@pytest.mark.parametrize(
    ("old_deadline", "new_deadline", "detail"),
    [
        (30, 60, "must be less than or equal to previous value"),
        (30, None, "must not update from a positive integer to nil value"),
    ],
)
def test_pod_active_deadline_may_only_shrink(
    old_deadline: int, new_deadline: int | None, detail: str
) -> None:
    old = make("Pod", mutate=lambda o: o["spec"].update(activeDeadlineSeconds=old_deadline))
    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = new_deadline
    assert [(f, m.split(": ", 2)[2]) for _, f, m in check("Pod", new, old)] == [
        ("spec.activeDeadlineSeconds", detail)
    ]


def test_status_only_changes_pass_pod_update_rules() -> None:
    old = make("Pod")
    new = copy.deepcopy(old)
    new["status"] = {"phase": "Running"}
    assert check("Pod", new, old) == []


# --- deployments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ({"type": "Recreate"}, []),
        (
            {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
            [("FieldValueForbidden", "spec.strategy.rollingUpdate")],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}},
            [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable")],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "150%"}},
            [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable")],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "abc", "maxUnavailable": 1}},
            [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxSurge")],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": -1, "maxUnavailable": 1}},
            [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxSurge")],
        ),
        ({"type": "BlueGreen"}, [("FieldValueNotSupported", "spec.strategy")]),
    ],
)
def test_deployment_strategy(strategy: Obj, expected: list[tuple[str, str]]) -> None:
    deploy = make("Deployment", mutate=lambda o: o["spec"].update(strategy=strategy))
    assert fields("Deployment", deploy) == expected


def test_deployment_both_zero_message() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}
    deploy = make("Deployment", mutate=lambda o: o["spec"].update(strategy=strategy))
    assert check("Deployment", deploy) == [
        (
            "FieldValueInvalid",
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: 0: may not be 0 when `maxSurge` is 0",
        )
    ]


def test_deployment_progress_deadline_exceeds_min_ready() -> None:
    deploy = make(
        "Deployment", mutate=lambda o: o["spec"].update(minReadySeconds=10, progressDeadlineSeconds=10)
    )
    assert check("Deployment", deploy) == [
        (
            "FieldValueInvalid",
            "spec.progressDeadlineSeconds",
            "Invalid value: 10: must be greater than minReadySeconds",
        )
    ]


def test_deployment_template_and_replicas_may_change() -> None:
    old = make("Deployment")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert check("Deployment", new, old) == []


# --- daemon sets and stateful sets ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("rolling", "expected"),
    [
        ({"maxUnavailable": 1, "maxSurge": 0}, []),
        ({"maxUnavailable": 0, "maxSurge": "10%"}, []),
        (
            {"maxUnavailable": 0, "maxSurge": 0},
            [("FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxUnavailable")],
        ),
        (
            {"maxUnavailable": 1, "maxSurge": 1},
            [("FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxSurge")],
        ),
    ],
)
def test_daemon_set_rolling_update(rolling: Obj, expected: list[tuple[str, str]]) -> None:
    ds = make(
        "DaemonSet",
        mutate=lambda o: o["spec"].update(updateStrategy={"type": "RollingUpdate", "rollingUpdate": rolling}),
    )
    assert fields("DaemonSet", ds) == expected


def test_daemon_set_unknown_strategy() -> None:
    ds = make("DaemonSet", mutate=lambda o: o["spec"].update(updateStrategy={"type": "Surge"}))
    assert fields("DaemonSet", ds) == [("FieldValueNotSupported", "spec.updateStrategy")]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"podManagementPolicy": "Random"}, [("FieldValueInvalid", "spec.podManagementPolicy")]),
        ({"updateStrategy": {"type": "OnDelete"}}, []),
        (
            {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}},
            [("FieldValueInvalid", "spec.updateStrategy.rollingUpdate")],
        ),
        (
            {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -1}}},
            [("FieldValueInvalid", "spec.updateStrategy.rollingUpdate.partition")],
        ),
        ({"updateStrategy": {"type": "Canary"}}, [("FieldValueInvalid", "spec.updateStrategy")]),
        (
            {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"}},
            [("FieldValueNotSupported", "spec.persistentVolumeClaimRetentionPolicy.whenDeleted")],
        ),
    ],
)
def test_stateful_set_spec(spec: Obj, expected: list[tuple[str, str]]) -> None:
    sts = make("StatefulSet", mutate=lambda o: o["spec"].update(spec))
    assert fields("StatefulSet", sts) == expected


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.update(replicas=5), []),
        (lambda s: s["template"]["spec"]["containers"][0].update(image="nginx:2"), []),
        (lambda s: s.update(updateStrategy={"type": "OnDelete"}), []),
        (lambda s: s.update(minReadySeconds=5, revisionHistoryLimit=3), []),
        (
            lambda s: s.update(
                persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Retain"}
            ),
            [],
        ),
        (lambda s: s.update(serviceName="other"), [("FieldValueForbidden", "spec")]),
        (
            lambda s: s["selector"].update(matchExpressions=[{"key": "app", "operator": "Exists"}]),
            [("FieldValueForbidden", "spec")],
        ),
        (lambda s: s.update(podManagementPolicy="Parallel"), [("FieldValueForbidden", "spec")]),
        (
            lambda s: s.update(volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {}}]),
            [("FieldValueForbidden", "spec")],
        ),
    ],
)
def test_stateful_set_update_rules(mutate: Callable[[Obj], None], expected: list[tuple[str, str]]) -> None:
    old = make("StatefulSet")
    new = copy.deepcopy(old)
    mutate(new["spec"])
    apply_defaults("apps", "StatefulSet", new)
    assert fields("StatefulSet", new, old) == expected


# --- replication controllers ---------------------------------------------------------------------


def test_replication_controller_selector_rules() -> None:
    rc = make("ReplicationController", mutate=lambda o: o["spec"].update(selector={"app": "other"}))
    assert fields("ReplicationController", rc) == [("FieldValueInvalid", "spec.template.metadata.labels")]
    rc = make("ReplicationController", mutate=lambda o: o["spec"].update(template=None, selector={}))
    assert fields("ReplicationController", rc) == [
        ("FieldValueRequired", "spec.selector"),
        ("FieldValueRequired", "spec.template"),
    ]


# --- jobs and cron jobs ----------------------------------------------------------------------


def test_job_pods_may_not_restart_always() -> None:
    job = make("Job", mutate=lambda o: o["spec"]["template"]["spec"].pop("restartPolicy"))
    assert check("Job", job) == [
        (
            "FieldValueRequired",
            "spec.template.spec.restartPolicy",
            'Required value: valid values: "OnFailure", "Never"',
        )
    ]


def test_job_generated_labels_must_not_be_overridden() -> None:
    job = make(
        "Job", mutate=lambda o: o["spec"]["template"]["metadata"]["labels"].update({"job-name": "other"})
    )
    assert fields("Job", job) == [("FieldValueInvalid", "spec.template.metadata.labels[job-name]")]
    assert check("Job", job)[0][2].endswith(": must be 'web'")


def test_job_selector_not_auto_generated() -> None:
    job = make("Job", mutate=lambda o: o["spec"].update(selector={"matchLabels": {"app": "web"}}))
    assert fields("Job", job) == [("FieldValueInvalid", "spec.selector")]
    assert check("Job", job)[0][2].endswith("`selector` not auto-generated")


def test_suspended_job_may_not_lose_its_generated_labels() -> None:
    # Its template's labels may change while it never ran; the generated ones must stay, or
    # its pods would escape its selector and be created without end.
    old = make("Job", mutate=lambda o: o["spec"].update(suspend=True))
    new = copy.deepcopy(old)
    for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
        del new["spec"]["template"]["metadata"]["labels"][key]
    assert check("Job", new, old) == [
        (
            "FieldValueRequired",
            "spec.template.metadata.labels[controller-uid]",
            "Required value: must be 'uid-1'",
        ),
        (
            "FieldValueRequired",
            "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]",
            "Required value: must be 'uid-1'",
        ),
        (
            "FieldValueInvalid",
            "spec.template.metadata.labels",
            'Invalid value: map[string]string{"app":"web", "batch.kubernetes.io/job-name":"web", '
            '"job-name":"web"}: `selector` does not match template `labels`',
        ),
    ]


def test_job_made_before_the_prefixed_labels_updates_without_them() -> None:
    old = make("Job")
    labels = old["spec"]["template"]["metadata"]["labels"]
    for key in ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"):
        del labels[key]
    old["spec"]["selector"] = {"matchLabels": {"controller-uid": "uid-1"}}
    new = copy.deepcopy(old)
    new["spec"]["parallelism"] = 2
    assert fields("Job", new, old) == []
    assert fields("Job", new) == [
        ("FieldValueRequired", "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]"),
        ("FieldValueRequired", "spec.template.metadata.labels[batch.kubernetes.io/job-name]"),
    ]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, []),
        ({}, []),  # upstream's Job takes an empty manual selector (it selects every pod)
        ({"matchLabels": {"app": "db"}}, [("FieldValueInvalid", "spec.template.metadata.labels")]),
        (None, [("FieldValueRequired", "spec.selector")]),
    ],
)
def test_job_manual_selector(selector: Obj | None, expected: list[tuple[str, str]]) -> None:
    def mutate(o: Obj) -> None:
        o["spec"]["manualSelector"] = True
        if selector is not None:
            o["spec"]["selector"] = selector

    assert fields("Job", make("Job", mutate=mutate)) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"completionMode": "Indexed", "completions": None, "parallelism": 2},
            [("FieldValueRequired", "spec.completions")],
        ),
        ({"completionMode": "Sometimes"}, [("FieldValueNotSupported", "spec.completionMode")]),
        ({"backoffLimit": -1}, [("FieldValueInvalid", "spec.backoffLimit")]),
        ({"parallelism": -1}, [("FieldValueInvalid", "spec.parallelism")]),
    ],
)
def test_job_spec_rules(spec: Obj, expected: list[tuple[str, str]]) -> None:
    assert fields("Job", make("Job", mutate=lambda o: o["spec"].update(spec))) == expected


@pytest.mark.parametrize(
    ("suspended", "mutate", "expected"),
    [
        (False, lambda s: s.update(parallelism=5), []),
        (False, lambda s: s.update(suspend=True), []),
        (False, lambda s: s.update(completions=3), [("FieldValueInvalid", "spec.completions")]),
        (
            False,
            lambda s: s.update(selector={"matchLabels": {"x": "y"}}),
            # not auto-generated, no longer selecting the template, immutable: upstream's three
            [
                ("FieldValueInvalid", "spec.selector"),
                ("FieldValueInvalid", "spec.template.metadata.labels"),
                ("FieldValueInvalid", "spec.selector"),
            ],
        ),
        (False, lambda s: s.update(completionMode="Indexed"), [("FieldValueInvalid", "spec.completionMode")]),
        (
            False,
            lambda s: s["template"]["spec"]["containers"][0].update(image="perl:2"),
            [("FieldValueInvalid", "spec.template")],
        ),
        (
            False,
            lambda s: s["template"]["spec"].update(nodeSelector={"zone": "a"}),
            [("FieldValueInvalid", "spec.template")],
        ),
        (True, lambda s: s["template"]["spec"].update(nodeSelector={"zone": "a"}), []),
        (
            True,
            lambda s: s["template"]["spec"]["containers"][0].update(image="perl:2"),
            [("FieldValueInvalid", "spec.template")],
        ),
    ],
)
def test_job_update_rules(
    suspended: bool, mutate: Callable[[Obj], None], expected: list[tuple[str, str]]
) -> None:
    old = make("Job", mutate=lambda o: o["spec"].update(suspend=suspended))
    new = copy.deepcopy(old)
    mutate(new["spec"])
    assert fields("Job", new, old) == expected


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        ("*/5 * * * *", None),
        ("0 0 1 jan,jul sun-sat", None),
        ("@hourly", None),
        ("@every 1h30m", None),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
        ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
        ("0 0 ? * MON-fri", None),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("@sometimes", "unrecognized descriptor: @sometimes"),
    ],
)
def test_cron_schedule_parsing(schedule: str, error: str | None) -> None:
    assert cron_schedule_error(schedule) == error


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"schedule": ""}, [("FieldValueRequired", "spec.schedule")]),
        ({"schedule": "not a cron"}, [("FieldValueInvalid", "spec.schedule")]),
        # robfig parses the zone prefix; only the TZ rule refuses it.
        ({"schedule": "CRON_TZ=UTC 0 * * * *"}, [("FieldValueInvalid", "spec.schedule")]),
        ({"schedule": "TZ=Nowhere/Land 0 * * * *"}, [("FieldValueInvalid", "spec.schedule")] * 2),
        ({"concurrencyPolicy": "Sometimes"}, [("FieldValueNotSupported", "spec.concurrencyPolicy")]),
        ({"startingDeadlineSeconds": -5}, [("FieldValueInvalid", "spec.startingDeadlineSeconds")]),
        ({"timeZone": "Europe/Rome"}, []),
        ({"timeZone": "Etc/GMT+5"}, []),
        ({"timeZone": ""}, [("FieldValueInvalid", "spec.timeZone")]),
        ({"timeZone": "Local"}, [("FieldValueInvalid", "spec.timeZone")]),
        ({"timeZone": "../etc/passwd"}, [("FieldValueInvalid", "spec.timeZone")]),
        ({"timeZone": "Mars/Olympus_Mons"}, [("FieldValueInvalid", "spec.timeZone")]),
    ],
)
def test_cron_job_spec_rules(spec: Obj, expected: list[tuple[str, str]]) -> None:
    assert fields("CronJob", make("CronJob", mutate=lambda o: o["spec"].update(spec))) == expected


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("Mars/Olympus_Mons", "unknown time zone Mars/Olympus_Mons"),
        ("Europe/Rome/", "unknown time zone Europe/Rome/"),
        ("", "timeZone must be nil or non-empty string"),
        ("Local", "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
    ],
)
def test_cron_job_time_zone_messages(zone: str, message: str) -> None:
    cj = make("CronJob", mutate=lambda o: o["spec"].update(timeZone=zone))
    expected = f'Invalid value: "{zone}": {message}'
    assert [m for _, f, m in check("CronJob", cj) if f == "spec.timeZone"] == [expected]


def test_cron_job_template_pods_may_not_restart_always() -> None:
    cj = make(
        "CronJob", mutate=lambda o: o["spec"]["jobTemplate"]["spec"]["template"]["spec"].pop("restartPolicy")
    )
    assert fields("CronJob", cj) == [
        ("FieldValueRequired", "spec.jobTemplate.spec.template.spec.restartPolicy")
    ]


# --- services -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"ports": []}, [("FieldValueRequired", "spec.ports")]),
        ({"ports": [], "clusterIP": "None"}, []),
        ({"type": "ExternalName", "externalName": "db.example.com", "ports": []}, []),
        ({"type": "ExternalName", "ports": []}, [("FieldValueRequired", "spec.externalName")]),
        (
            {"ports": [{"port": 80}, {"port": 443}]},
            [("FieldValueRequired", "spec.ports[0].name"), ("FieldValueRequired", "spec.ports[1].name")],
        ),
        (
            {"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 443}]},
            [("FieldValueDuplicate", "spec.ports[1].name")],
        ),
        (
            {"ports": [{"port": 70000}]},
            [("FieldValueInvalid", "spec.ports[0].port"), ("FieldValueInvalid", "spec.ports[0].targetPort")],
        ),
        ({"ports": [{"port": 80, "targetPort": "http"}]}, []),
        (
            {"ports": [{"port": 80, "targetPort": "Bad_Name"}]},
            [("FieldValueInvalid", "spec.ports[0].targetPort")],
        ),
        (
            {"ports": [{"port": 80, "protocol": "ICMP"}]},
            [("FieldValueNotSupported", "spec.ports[0].protocol")],
        ),
        ({"type": "Internal", "ports": [{"port": 80}]}, [("FieldValueNotSupported", "spec.type")]),
        (
            {"sessionAffinity": "Cookie", "ports": [{"port": 80}]},
            [("FieldValueNotSupported", "spec.sessionAffinity")],
        ),
        (
            {"selector": {"app": "bad value"}, "ports": [{"port": 80}]},
            [("FieldValueInvalid", "spec.selector")],
        ),
    ],
)
def test_service_spec_rules(spec: Obj, expected: list[tuple[str, str]]) -> None:
    svc = make("Service", mutate=lambda o: o["spec"].update(spec))
    assert fields("Service", svc) == expected


def test_service_cluster_ip_is_immutable_once_set() -> None:
    old = make(
        "Service", mutate=lambda o: o["spec"].update(clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"])
    )
    new = copy.deepcopy(old)
    new["spec"]["clusterIP"] = "10.96.0.11"
    assert check("Service", new, old) == [
        ("FieldValueInvalid", "spec.clusterIP", 'Invalid value: "10.96.0.11": field is immutable')
    ]
    new["spec"].update(type="ExternalName", externalName="example.com", clusterIP="", ports=[])
    assert check("Service", new, old) == []


# --- other kinds ---------------------------------------------------------------------------------


def test_pdb_may_not_set_both_bounds() -> None:
    pdb = make("PodDisruptionBudget", mutate=lambda o: o["spec"].update(maxUnavailable="10%"))
    assert fields("PodDisruptionBudget", pdb) == [("FieldValueInvalid", "spec")]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minReplicas": 0}, [("FieldValueInvalid", "spec.minReplicas")]),
        ({"minReplicas": 5, "maxReplicas": 3}, [("FieldValueInvalid", "spec.maxReplicas")]),
        (
            {"scaleTargetRef": {}},
            [
                ("FieldValueRequired", "spec.scaleTargetRef.kind"),
                ("FieldValueRequired", "spec.scaleTargetRef.name"),
            ],
        ),
    ],
)
def test_hpa_rules(spec: Obj, expected: list[tuple[str, str]]) -> None:
    hpa = make("HorizontalPodAutoscaler", mutate=lambda o: o["spec"].update(spec))
    assert fields("HorizontalPodAutoscaler", hpa) == expected


def test_config_map_keys() -> None:
    cm = make(
        "ConfigMap",
        mutate=lambda o: o.update(data={"bad key": "x", "..dots": "y"}, binaryData={"ok": "eA=="}),
    )
    assert fields("ConfigMap", cm) == [
        ("FieldValueInvalid", "data[..dots]"),
        ("FieldValueInvalid", "data[bad key]"),
    ]
    cm = make("ConfigMap", mutate=lambda o: o.update(data={"k": "x"}, binaryData={"k": "eA=="}))
    assert fields("ConfigMap", cm) == [("FieldValueInvalid", "binaryData[k]")]


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_immutable_data_stays_put(kind: str) -> None:
    old = make(kind, mutate=lambda o: o.update(immutable=True))
    new = copy.deepcopy(old)
    new["data"] = {"other": "eA=="}
    assert check(kind, new, old) == [
        ("FieldValueForbidden", "data", "Forbidden: field is immutable when `immutable` is set")
    ]
    new = copy.deepcopy(old)
    new["immutable"] = False
    assert fields(kind, new, old) == [("FieldValueForbidden", "immutable")]


def test_secret_type_is_immutable() -> None:
    old = make("Secret")
    new = copy.deepcopy(old)
    new["type"] = "kubernetes.io/tls"
    assert fields("Secret", new, old) == [("FieldValueInvalid", "type")]


def test_crd_name_must_be_plural_dot_group() -> None:
    crd = make("CustomResourceDefinition", "gadgets.example.com")
    assert check("CustomResourceDefinition", crd) == [
        (
            "FieldValueInvalid",
            "metadata.name",
            'Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group',
        )
    ]


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        # Go's strconv.Quote, which %q uses in upstream's messages.
        ("plain", '"plain"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("x\ny\tz\r", '"x\\ny\\tz\\r"'),
        ("\x00\x07\x7f", '"\\x00\\a\\x7f"'),
        ("é😀", '"é😀"'),
        ("\u00a0\u200b\u2028", '"\\u00a0\\u200b\\u2028"'),
        ("\U000e0001", '"\\U000e0001"'),
    ],
)
def test_go_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


ALL = ["All"]


@pytest.mark.parametrize(
    ("causes", "expected"),
    [
        # apimachinery's ValidateCreateOptions / ValidateUpdateOptions / ValidatePatchOptions.
        (write_options(ALL, "kubectl", "Strict"), []),
        (write_options([], "", ""), []),
        (
            write_options([], "", "strict"),
            [
                (
                    "fieldValidation",
                    'Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"',
                )
            ],
        ),
        (
            write_options(["All", "x"], "", ""),
            [("dryRun", 'Unsupported value: []string{"All", "x"}: supported values: "All"')],
        ),
        (write_options([], "m" * 129, ""), [("fieldManager", "Too long: may not be more than 128 bytes")]),
        (
            write_options([], "é\tx", ""),
            [("fieldManager", 'Invalid value: "é\\tx": invalid character U+0009 (at position 2)')],
        ),
        (patch_options([], "", "", apply=False, force=False), []),
        (
            patch_options([], "", "", apply=True, force=True),
            [("fieldManager", "Required value: is required for apply patch")],
        ),
        (
            patch_options([], "m", "", apply=False, force=True),
            [("force", "Forbidden: may not be specified for non-apply patch")],
        ),
        (delete_options(["x"]), [("dryRun", 'Unsupported value: []string{"x"}: supported values: "All"')]),
    ],
)
def test_request_options(causes: list[Cause], expected: list[tuple[str, str]]) -> None:
    assert [(c["field"], c["message"]) for c in causes] == expected


@pytest.mark.parametrize(
    ("template_spec", "expected"),
    [
        (
            {"selector": {"matchLabels": {"app": "web"}}},
            [
                (
                    "FieldValueInvalid",
                    "spec.jobTemplate.spec.selector",
                    'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, '
                    "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated",
                )
            ],
        ),
        (
            {"manualSelector": True},
            [
                (
                    "FieldValueNotSupported",
                    "spec.jobTemplate.spec.manualSelector",
                    'Unsupported value: true: supported values: "nil", "false"',
                )
            ],
        ),
        ({"manualSelector": False}, []),
    ],
)
def test_cron_job_template_may_not_choose_its_selector(
    template_spec: Obj, expected: list[tuple[str, str, str]]
) -> None:
    cj = make("CronJob", mutate=lambda o: o["spec"]["jobTemplate"]["spec"].update(template_spec))
    assert check("CronJob", cj) == expected


TZ_ONLY = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
TZ_BOTH = "cannot use both timeZone field and TZ or CRON_TZ in schedule"


@pytest.mark.parametrize(
    ("old_schedule", "schedule", "zone", "message"),
    [
        (None, "TZ=UTC 0 * * * *", "Europe/Rome", TZ_ONLY),  # create: never, zone or not
        (None, "TZ=UTC 0 * * * *", None, TZ_ONLY),
        ("0 * * * *", "TZ=UTC 0 * * * *", None, TZ_ONLY),  # an update may not add one
        ("TZ=UTC 0 * * * *", "TZ=UTC 5 * * * *", None, None),  # ... but may keep one
        ("TZ=UTC 0 * * * *", "TZ=UTC 0 * * * *", "Europe/Rome", TZ_BOTH),
    ],
)
def test_cron_job_tz_in_schedule(
    old_schedule: str | None, schedule: str, zone: str | None, message: str | None
) -> None:
    def mutate(o: Obj) -> None:
        o["spec"]["schedule"] = schedule
        if zone is not None:
            o["spec"]["timeZone"] = zone

    new = make("CronJob", mutate=mutate)
    old = None
    if old_schedule is not None:
        old = make("CronJob", mutate=lambda o: o["spec"].update(schedule=old_schedule))
    got = [m for _, f, m in check("CronJob", new, old) if f == "spec.schedule"]
    assert got == ([f'Invalid value: "{schedule}": {message}'] if message else [])


def test_cron_job_update_keeps_an_old_zone_and_long_name() -> None:
    # Neither is re-checked on update (upstream: an unchanged timeZone, the 52-character limit).
    name = "c" * 60
    old = make("CronJob", name, lambda o: o["spec"].update(timeZone="Local"))
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert check("CronJob", new, old) == []
    assert fields("CronJob", old) == [
        ("FieldValueInvalid", "spec.timeZone"),
        ("FieldValueInvalid", "metadata.name"),
    ]
