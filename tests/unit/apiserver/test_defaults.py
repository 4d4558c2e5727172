"""Defaulting of built-in objects, checked against what upstream kube-apiserver stores."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver.defaults import apply_defaults, generate_job_selector, image_tag

Obj = dict[str, Any]


def _defaulted(group: str, kind: str, obj: Obj) -> Obj:
    apply_defaults(group, kind, obj)
    return obj


def _template(**spec: Any) -> Obj:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}], **spec},
    }


POD_SPEC_DEFAULTS = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
}


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("nginx", "latest"),
        ("nginx:latest", "latest"),
        ("nginx:1.25", "1.25"),
        ("localhost:5000/nginx", "latest"),
        ("localhost:5000/nginx:v1", "v1"),
        ("nginx@sha256:" + "a" * 64, ""),
        ("nginx:1.25@sha256:" + "a" * 64, "1.25"),
        ("", ""),
    ],
)
def test_image_tag(image: str, tag: str) -> None:
    assert image_tag(image) == tag


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("a@sha256:" + "b" * 64, "IfNotPresent"),
    ],
)
def test_container_image_pull_policy_follows_tag(image: str, policy: str) -> None:
    pod = _defaulted("", "Pod", {"spec": {"containers": [{"name": "c", "image": image}]}})
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_pod_spec_and_container_defaults() -> None:
    pod = _defaulted(
        "",
        "Pod",
        {
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "nginx:1",
                        "ports": [{"containerPort": 80}],
                        "livenessProbe": {"httpGet": {"port": 80}},
                        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                        "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    }
                ],
                "initContainers": [{"name": "i", "image": "busybox"}],
            }
        },
    )
    spec = pod["spec"]
    assert {k: spec[k] for k in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    assert spec["enableServiceLinks"] is True
    c = spec["containers"][0]
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["livenessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert c["readinessProbe"]["periodSeconds"] == 5
    assert c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert spec["initContainers"][0]["imagePullPolicy"] == "Always"


def test_pod_defaults_keep_client_values() -> None:
    spec = {
        "restartPolicy": "Never",
        "dnsPolicy": "Default",
        "terminationGracePeriodSeconds": 0,
        "schedulerName": "mine",
        "enableServiceLinks": False,
        "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}],
    }
    pod = _defaulted("", "Pod", {"spec": copy.deepcopy(spec)})
    for key in (
        "restartPolicy",
        "dnsPolicy",
        "terminationGracePeriodSeconds",
        "schedulerName",
        "enableServiceLinks",
    ):
        assert pod["spec"][key] == spec[key]
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_pod_requests_default_to_limits() -> None:
    resources = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}
    pod = _defaulted(
        "", "Pod", {"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}
    )
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}


def test_template_requests_are_not_defaulted_from_limits() -> None:
    resources = {"limits": {"cpu": "1"}}
    deploy = _defaulted("apps", "Deployment", {"spec": {"template": _template()}})
    deploy["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    apply_defaults("apps", "Deployment", deploy)
    assert "requests" not in deploy["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_host_network_pods_get_host_ports() -> None:
    pod = _defaulted(
        "",
        "Pod",
        {
            "spec": {
                "hostNetwork": True,
                "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}],
            }
        },
    )
    assert pod["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080


def test_volume_defaults() -> None:
    volumes = [
        {"name": "empty"},
        {"name": "cm", "configMap": {"name": "c"}},
        {"name": "sec", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "hp", "hostPath": {"path": "/x"}},
        {"name": "proj", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
    ]
    pod = _defaulted("", "Pod", {"spec": {"containers": [{"name": "c", "image": "x"}], "volumes": volumes}})
    got = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert got["empty"] == {"name": "empty", "emptyDir": {}}
    assert got["cm"]["configMap"]["defaultMode"] == 420
    assert got["sec"]["secret"]["defaultMode"] == 256
    assert got["hp"]["hostPath"]["type"] == ""
    assert got["proj"]["projected"]["defaultMode"] == 420
    assert got["proj"]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert got["eph"]["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"] == "Filesystem"


@pytest.mark.parametrize(
    ("group", "kind", "obj", "template_path"),
    [
        ("apps", "Deployment", {"spec": {"template": _template()}}, ("spec", "template")),
        ("apps", "ReplicaSet", {"spec": {"template": _template()}}, ("spec", "template")),
        ("apps", "StatefulSet", {"spec": {"template": _template()}}, ("spec", "template")),
        ("apps", "DaemonSet", {"spec": {"template": _template()}}, ("spec", "template")),
        ("batch", "Job", {"spec": {"template": _template(restartPolicy="Never")}}, ("spec", "template")),
        (
            "batch",
            "CronJob",
            {"spec": {"jobTemplate": {"spec": {"template": _template(restartPolicy="OnFailure")}}}},
            ("spec", "jobTemplate", "spec", "template"),
        ),
        ("", "ReplicationController", {"spec": {"template": _template()}}, ("spec", "template")),
        ("", "PodTemplate", {"template": _template()}, ("template",)),
    ],
)
def test_pod_templates_are_defaulted_everywhere(
    group: str, kind: str, obj: Obj, template_path: tuple[str, ...]
) -> None:
    apply_defaults(group, kind, obj)
    template = obj
    for key in template_path:
        template = template[key]
    spec = template["spec"]
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "enableServiceLinks" not in spec


@pytest.mark.parametrize(
    ("group", "kind", "spec", "expected"),
    [
        (
            "apps",
            "Deployment",
            {},
            {
                "replicas": 1,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
        ),
        (
            "apps",
            "Deployment",
            {"replicas": 0, "strategy": {"type": "Recreate"}},
            {"replicas": 0, "strategy": {"type": "Recreate"}},
        ),
        (
            "apps",
            "Deployment",
            {"strategy": {"rollingUpdate": {"maxSurge": 0}}},
            {
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"},
                }
            },
        ),
        ("apps", "ReplicaSet", {}, {"replicas": 1}),
        (
            "apps",
            "StatefulSet",
            {},
            {
                "replicas": 1,
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            },
        ),
        (
            "apps",
            "StatefulSet",
            {"updateStrategy": {"type": "OnDelete"}},
            {"updateStrategy": {"type": "OnDelete"}},
        ),
        (
            "apps",
            "DaemonSet",
            {},
            {
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
                },
                "revisionHistoryLimit": 10,
            },
        ),
        (
            "batch",
            "Job",
            {},
            {
                "completions": 1,
                "parallelism": 1,
                "backoffLimit": 6,
                "completionMode": "NonIndexed",
                "suspend": False,
                "podReplacementPolicy": "TerminatingOrFailed",
            },
        ),
        ("batch", "Job", {"parallelism": 3}, {"parallelism": 3, "backoffLimit": 6}),
        ("batch", "Job", {"completions": 5}, {"completions": 5, "parallelism": 1}),
        (
            "batch",
            "Job",
            {"backoffLimitPerIndex": 1, "completionMode": "Indexed"},
            {"backoffLimit": 2**31 - 1},
        ),
        (
            "batch",
            "Job",
            {
                "podFailurePolicy": {
                    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
                }
            },
            {
                "podReplacementPolicy": "Failed",
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                    ]
                },
            },
        ),
        (
            "batch",
            "CronJob",
            {},
            {
                "concurrencyPolicy": "Allow",
                "suspend": False,
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1,
            },
        ),
        ("", "ReplicationController", {}, {"replicas": 1}),
        ("autoscaling", "HorizontalPodAutoscaler", {"maxReplicas": 3}, {"minReplicas": 1, "maxReplicas": 3}),
        ("", "PersistentVolumeClaim", {}, {"volumeMode": "Filesystem"}),
        ("", "PersistentVolume", {}, {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}),
    ],
)
def test_spec_defaults(group: str, kind: str, spec: Obj, expected: Obj) -> None:
    obj = _defaulted(group, kind, {"spec": spec})
    for key, value in expected.items():
        assert obj["spec"][key] == value, key


def test_job_defaults_manual_selector_to_false() -> None:
    job = _defaulted("batch", "Job", {"spec": {"template": _template()}})
    assert job["spec"]["manualSelector"] is False
    assert job["metadata"]["labels"] == {"app": "web"}


def test_job_without_labels_takes_the_generated_ones() -> None:
    # kube-apiserver defaults on decode, after the selector was generated: `kubectl get jobs
    # -l job-name=pi` finds a Job made without labels.
    job = _defaulted("batch", "Job", {"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {}}})
    generate_job_selector(job)
    assert job["metadata"]["labels"] == {
        "batch.kubernetes.io/job-name": "pi",
        "job-name": "pi",
        "batch.kubernetes.io/controller-uid": "u1",
        "controller-uid": "u1",
    }


def test_job_keeps_its_own_labels() -> None:
    job = _defaulted(
        "batch", "Job", {"metadata": {"labels": {"mine": "1"}}, "spec": {"template": _template()}}
    )
    assert job["metadata"]["labels"] == {"mine": "1"}


def test_hpa_defaults_to_cpu_utilization_metric() -> None:
    hpa = _defaulted("autoscaling", "HorizontalPodAutoscaler", {"spec": {"maxReplicas": 3}})
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]


def test_replication_controller_selector_and_labels_from_template() -> None:
    rc = _defaulted(
        "", "ReplicationController", {"metadata": {"name": "r"}, "spec": {"template": _template()}}
    )
    assert rc["spec"]["selector"] == {"app": "web"}
    assert rc["metadata"]["labels"] == {"app": "web"}
    rc2 = _defaulted("", "ReplicationController", {"spec": {"selector": {"x": "y"}, "template": _template()}})
    assert rc2["spec"]["selector"] == {"x": "y"}


def test_service_defaults() -> None:
    svc = _defaulted(
        "",
        "Service",
        {
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}],
            }
        },
    )
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 80},
        {"port": 53, "protocol": "UDP", "targetPort": "dns"},
    ]
    assert "clusterIP" not in spec
    assert "externalTrafficPolicy" not in spec


@pytest.mark.parametrize(
    ("spec", "expected", "absent"),
    [
        (
            {"type": "LoadBalancer", "ports": [{"port": 80}]},
            {
                "externalTrafficPolicy": "Cluster",
                "allocateLoadBalancerNodePorts": True,
                "internalTrafficPolicy": "Cluster",
            },
            [],
        ),
        (
            {"type": "NodePort", "ports": [{"port": 80}]},
            {"externalTrafficPolicy": "Cluster"},
            ["allocateLoadBalancerNodePorts"],
        ),
        (
            {"type": "ExternalName", "externalName": "example.com"},
            {"sessionAffinity": "None"},
            ["internalTrafficPolicy", "ipFamilies", "ipFamilyPolicy"],
        ),
        (
            {"sessionAffinity": "ClientIP", "ports": [{"port": 80}]},
            {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
            [],
        ),
        (
            {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}, "ports": [{"port": 80}]},
            {},
            ["sessionAffinityConfig"],
        ),
    ],
)
def test_service_type_specific_defaults(spec: Obj, expected: Obj, absent: list[str]) -> None:
    got = _defaulted("", "Service", {"spec": spec})["spec"]
    for key, value in expected.items():
        assert got[key] == value, key
    for key in absent:
        assert key not in got, key


@pytest.mark.parametrize(
    ("group", "kind", "obj", "expected"),
    [
        ("", "Secret", {}, {"type": "Opaque"}),
        ("", "Secret", {"type": "kubernetes.io/tls"}, {"type": "kubernetes.io/tls"}),
        (
            "",
            "Namespace",
            {"metadata": {"name": "team-a"}},
            {
                "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                "status": {"phase": "Active"},
            },
        ),
        (
            "",
            "Endpoints",
            {"subsets": [{"ports": [{"port": 80}]}]},
            {"subsets": [{"ports": [{"port": 80, "protocol": "TCP"}]}]},
        ),
        (
            "discovery.k8s.io",
            "EndpointSlice",
            {"ports": [{"port": 80}]},
            {"ports": [{"port": 80, "name": "", "protocol": "TCP"}]},
        ),
        (
            "",
            "Node",
            {"status": {"capacity": {"cpu": "2"}}},
            {"status": {"capacity": {"cpu": "2"}, "allocatable": {"cpu": "2"}}},
        ),
        ("storage.k8s.io", "StorageClass", {}, {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            {
                "roleRef": {"kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}],
            },
            {
                "roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
                "subjects": [
                    {"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"},
                    {"kind": "ServiceAccount", "name": "s", "apiGroup": ""},
                ],
            },
        ),
        ("", "ServiceAccount", {"metadata": {"name": "sa"}}, {"metadata": {"name": "sa"}}),
        ("coordination.k8s.io", "Lease", {"spec": {}}, {"spec": {}}),
        ("example.com", "Widget", {"spec": {"x": 1}}, {"spec": {"x": 1}}),
    ],
)
def test_whole_object_defaults(group: str, kind: str, obj: Obj, expected: Obj) -> None:
    assert _defaulted(group, kind, obj) == expected


def test_defaulting_is_idempotent() -> None:
    deploy = _defaulted("apps", "Deployment", {"spec": {"template": _template()}})
    again = _defaulted("apps", "Deployment", copy.deepcopy(deploy))
    assert again == deploy


def _job(**spec: Any) -> Obj:
    return {
        "metadata": {"name": "pi", "uid": "u-1"},
        "spec": {"template": _template(restartPolicy="Never"), **spec},
    }


def test_generate_job_selector() -> None:
    job = _job()
    generate_job_selector(job)
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "app": "web",
        "batch.kubernetes.io/controller-uid": "u-1",
        "controller-uid": "u-1",
        "batch.kubernetes.io/job-name": "pi",
        "job-name": "pi",
    }


def test_generate_job_selector_skips_manual_selector() -> None:
    job = _job(manualSelector=True, selector={"matchLabels": {"app": "web"}})
    before = copy.deepcopy(job)
    generate_job_selector(job)
    assert job == before


def test_generate_job_selector_keeps_user_labels_for_validation_to_judge() -> None:
    job = _job()
    job["spec"]["template"]["metadata"]["labels"]["job-name"] = "other"
    generate_job_selector(job)
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "other"
    assert job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "pi"


def test_hpa_behavior_left_unset_stays_unset() -> None:
    hpa = _defaulted("autoscaling", "HorizontalPodAutoscaler", {"spec": {"maxReplicas": 3}})
    assert "behavior" not in hpa["spec"]


def test_hpa_behavior_unset_rules_get_upstreams_defaults() -> None:
    spec = {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}
    hpa = _defaulted("autoscaling", "HorizontalPodAutoscaler", {"spec": spec})
    assert hpa["spec"]["behavior"] == {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        },
        # Scale-down keeps no window of its own unless given: the controller's flag decides it.
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
    }


def test_hpa_behavior_given_fields_are_kept() -> None:
    policies = [{"type": "Pods", "value": 1, "periodSeconds": 60}]
    spec = {"maxReplicas": 3, "behavior": {"scaleUp": {"selectPolicy": "Disabled", "policies": policies}}}
    hpa = _defaulted("autoscaling", "HorizontalPodAutoscaler", {"spec": spec})
    assert hpa["spec"]["behavior"]["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Disabled",
        "policies": policies,
    }
    assert "stabilizationWindowSeconds" not in hpa["spec"]["behavior"]["scaleDown"]
