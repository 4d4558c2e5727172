"""The type checker against upstream's texts: every expected warning below is what upstream
kube-controller-manager v1.32.13 wrote on kube-apiserver for a policy matching apps/v1
deployments (the `apps/v1, Kind=Deployment: ` prefix and final newline left to
`typecheck.warning_text`); "" means it wrote no warning. The schema is a trimmed copy of the
shapes kube-apiserver serves in /openapi/v3/apis/apps/v1 (refs wrapped in allOf, ObjectMeta,
int-or-string, Time)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest
from kcm_controllers.vapstatus import celcheck, policy, schema, typecheck
from kcm_shared.testing import fakeclient

REF = "#/components/schemas/"


def ref(name: str) -> dict[str, Any]:
    return {"allOf": [{"$ref": REF + name}], "default": {}}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


STRING = {"type": "string"}
INT = {"type": "integer", "format": "int32"}
DOCUMENT = {
    "components": {
        "schemas": {
            "Deployment": {
                **obj(
                    apiVersion=STRING,
                    kind=STRING,
                    metadata=ref("ObjectMeta"),
                    spec=ref("DeploymentSpec"),
                    status=obj(replicas=INT),
                ),
                "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Deployment", "version": "v1"}],
            },
            "ObjectMeta": obj(
                name=STRING,
                generateName=STRING,
                labels={"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                annotations={"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                creationTimestamp=ref("Time"),
            ),
            "Time": {"type": "string", "format": "date-time"},
            "IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
            "DeploymentSpec": obj(
                replicas=INT,
                minReadySeconds=INT,
                paused={"type": "boolean"},
                selector=obj(matchLabels={"type": "object", "additionalProperties": STRING}),
                strategy=obj(rollingUpdate=obj(maxSurge=ref("IntOrString"))),
                template=obj(spec=obj(containers={"type": "array", "items": obj(name=STRING, image=STRING)})),
            ),
        }
    }
}
ROOT = schema.root_type(DOCUMENT, "apps", "v1", "Deployment")

# (expression, upstream's issues); long source lines stay whole, as upstream prints them.
CASES = [
    (
        "object.spec.replicas <= 5",
        "",
    ),
    (
        "object.spec.replicas.foo == 1",
        "ERROR: <input>:1:21: type 'int' does not support field selection\n"
        " | object.spec.replicas.foo == 1\n"
        " | ....................^",
    ),
    (
        "object.metadata.labels.foo.bar == 1",
        "ERROR: <input>:1:27: type 'string' does not support field selection\n"
        " | object.metadata.labels.foo.bar == 1\n"
        " | ..........................^",
    ),
    (
        "object.metadata.namez == 'a' || object.metadata.labels.foo == 'x' || has(object.metadata.annotationz)",
        "ERROR: <input>:1:16: undefined field 'namez'\n"
        " | object.metadata.namez == 'a' || object.metadata.labels.foo == 'x' || has(object.metadata.annotationz)\n"
        " | ...............^\n"
        "ERROR: <input>:1:73: undefined field 'annotationz'\n"
        " | object.metadata.namez == 'a' || object.metadata.labels.foo == 'x' || has(object.metadata.annotationz)\n"
        " | ........................................................................^",
    ),
    (
        "object.spec.replicas == 'x'",
        "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n"
        " | object.spec.replicas == 'x'\n"
        " | .....................^",
    ),
    (
        "object.spec.replicas > 1 &&\n  object.spec.replicaz > 2",
        "ERROR: <input>:2:14: undefined field 'replicaz'\n |   object.spec.replicaz > 2\n | .............^",
    ),
    (
        "oldObject.spec.replicaz == 1",
        "ERROR: <input>:1:15: undefined field 'replicaz'\n"
        " | oldObject.spec.replicaz == 1\n"
        " | ..............^",
    ),
    (
        "object.spec.paused && 1 == 1 && object.spec.replicas",
        "ERROR: <input>:1:44: expected type 'bool' but found 'int'\n"
        " | object.spec.paused && 1 == 1 && object.spec.replicas\n"
        " | ...........................................^",
    ),
    (
        "object.spec.paused == 1",
        "ERROR: <input>:1:20: found no matching overload for '_==_' applied to '(bool, int)'\n"
        " | object.spec.paused == 1\n"
        " | ...................^",
    ),
    (
        "object.metadata.name < 1",
        "ERROR: <input>:1:22: found no matching overload for '_<_' applied to '(string, int)'\n"
        " | object.metadata.name < 1\n"
        " | .....................^",
    ),
    (
        "object.spec.strategy.rollingUpdate.maxSurge == 'a' && object.spec.strategy.rollingUpdate.maxSurge > 1",
        "",
    ),
    (
        "object.spec.replicas == 1.0",
        "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, double)'\n"
        " | object.spec.replicas == 1.0\n"
        " | .....................^",
    ),
    (
        "object.spec.replicas in ['a']",
        "ERROR: <input>:1:22: found no matching overload for '@in' applied to '(int, list(string))'\n"
        " | object.spec.replicas in ['a']\n"
        " | .....................^",
    ),
    (
        "object.spec.template.spec.containers.exists(c, c.name == 1)",
        "ERROR: <input>:1:55: found no matching overload for '_==_' applied to '(string, int)'\n"
        " | object.spec.template.spec.containers.exists(c, c.name == 1)\n"
        " | ......................................................^",
    ),
    (
        "object.spec.replicas > 1.5",
        "",
    ),
    (
        "object.spec.replicas > 1u",
        "",
    ),
    (
        "'a' in object.metadata.labels && 1 in object.metadata.labels",
        "ERROR: <input>:1:36: found no matching overload for '@in' applied to '(int, map(string, string))'\n"
        " | 'a' in object.metadata.labels && 1 in object.metadata.labels\n"
        " | ...................................^",
    ),
    (
        "object.metadata.labels.all(k, k == 1)",
        "ERROR: <input>:1:33: found no matching overload for '_==_' applied to '(string, int)'\n"
        " | object.metadata.labels.all(k, k == 1)\n"
        " | ................................^",
    ),
    (
        "-object.metadata.name == 1",
        "ERROR: <input>:1:1: found no matching overload for '-_' applied to '(string)'\n"
        " | -object.metadata.name == 1\n"
        " | ^",
    ),
    (
        "!object.spec.replicas",
        "ERROR: <input>:1:1: found no matching overload for '!_' applied to '(int)'\n"
        " | !object.spec.replicas\n"
        " | ^",
    ),
    (
        "object.metadata.name == null",
        "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(string, null)'\n"
        " | object.metadata.name == null\n"
        " | .....................^",
    ),
    (
        "object.spec.selector == null",
        "",
    ),
    (
        "object.status.replicaz == 1",
        "ERROR: <input>:1:14: undefined field 'replicaz'\n | object.status.replicaz == 1\n | .............^",
    ),
    (
        "object.spec.strategy.rollingUpdate.maxSurge == 1 && object.spec.strategy.rollingUpdate.maxSurge.foo == 1",
        "",
    ),
    (
        "object.metadata.name.foo == 1",
        "ERROR: <input>:1:21: type 'string' does not support field selection\n"
        " | object.metadata.name.foo == 1\n"
        " | ....................^",
    ),
    (
        "\tobject.spec.replicaz == 1",
        "ERROR: <input>:1:13: undefined field 'replicaz'\n |  object.spec.replicaz == 1\n | ............^",
    ),
    (
        "object.metadata.creationTimestamp.foo == 1",
        "ERROR: <input>:1:34: type 'timestamp' does not support field selection\n"
        " | object.metadata.creationTimestamp.foo == 1\n"
        " | .................................^",
    ),
    (
        "object.spec.replicaz > 1 && object.spec.minReadySecondz > 0",
        "ERROR: <input>:1:12: undefined field 'replicaz'\n"
        " | object.spec.replicaz > 1 && object.spec.minReadySecondz > 0\n"
        " | ...........^\n"
        "ERROR: <input>:1:40: undefined field 'minReadySecondz'\n"
        " | object.spec.replicaz > 1 && object.spec.minReadySecondz > 0\n"
        " | .......................................^",
    ),
    (
        "object.spec.replicaz > 1",
        "ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^",
    ),
    (
        "object.spec.template.spec.containers.all(c, c.imagez != '')",
        "ERROR: <input>:1:46: undefined field 'imagez'\n"
        " | object.spec.template.spec.containers.all(c, c.imagez != '')\n"
        " | .............................................^",
    ),
    (
        "object.spec.template.spec.containers[0].imagez == 'x'",
        "ERROR: <input>:1:40: undefined field 'imagez'\n"
        " | object.spec.template.spec.containers[0].imagez == 'x'\n"
        " | .......................................^",
    ),
    (
        "'é' == object.spec.replicaz",
        "ERROR: <input>:1:19: undefined field 'replicaz'\n"
        " | 'é' == object.spec.replicaz\n"
        " | .\uff0e................^",
    ),
]


@pytest.mark.parametrize(("expression", "issues"), CASES)
def test_upstreams_warning_for_a_deployment_policy(expression: str, issues: str) -> None:
    assert ROOT is not None
    assert celcheck.check(expression, ROOT) == issues


@pytest.mark.parametrize(
    "expression",
    [
        "object.spec.template.spec.containers.foo == 1",  # cel-go names the list type per run
        "params.max > object.spec.replicas",  # params, request, variables: not typed here
        "object.spec.replicas > 1 && quantity('1').isInteger()",  # a function not typed here
        "object.spec.replicas >",  # a syntax error: the API server refuses it anyway
        "object.spec.replicas == Foo{}",
        "object.spec.?replicas == 1",
        "object.metadata.name == []",  # cel-go prints an empty list's type parameter
        "object.spec.replicas in [1, 'a']",
        "object.spec.replicaz.isSorted()",  # a function not typed here, on a failed selection
    ],
)
def test_what_it_cannot_decide_gets_no_warning(expression: str) -> None:
    assert ROOT is not None
    assert celcheck.check(expression, ROOT) is None


def test_a_root_without_object_meta_gets_upstreams_metadata() -> None:
    document = {
        "components": {
            "schemas": {
                "Thing": {
                    **obj(spec=obj(size=INT)),
                    "x-kubernetes-group-version-kind": [{"group": "x.io", "kind": "Thing", "version": "v1"}],
                }
            }
        }
    }
    root = schema.root_type(document, "x.io", "v1", "Thing")
    assert root is not None
    assert celcheck.check("object.metadata.name == object.kind && object.spec.size > 0", root) == ""
    assert celcheck.check("object.metadata.labels == {}", root) is None  # a map literal: undecided
    assert "undefined field 'uid'" in (celcheck.check("object.metadata.uid == ''", root) or "")


def test_a_kind_without_schema_is_skipped() -> None:
    assert schema.root_type(DOCUMENT, "apps", "v1", "ReplicaSet") is None
    assert schema.root_type(None, "apps", "v1", "Deployment") is None


def test_the_warning_names_each_kind_as_upstream() -> None:
    pod, deployment = ("", "v1", "Pod"), ("apps", "v1", "Deployment")
    text = typecheck.warning_text([(pod, "ERROR: a"), (deployment, ""), (deployment, "ERROR: b")])
    assert text == "/v1, Kind=Pod: ERROR: a\n\napps/v1, Kind=Deployment: ERROR: b\n"


class ServedClient(fakeclient.FakeClient):
    """Discovery with apps/v1 deployments (and replicasets, whose schema is not served) and the
    apps/v1 OpenAPI v3 document above; the number of discovery reads is counted."""

    def __init__(self) -> None:
        super().__init__()
        self.discoveries = 0
        self.answers: dict[str, Any] = {
            "/api": {"versions": []},
            "/apis": {
                "groups": [
                    {"name": "apps", "versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}
                ]
            },
            "/apis/apps/v1": {
                "resources": [
                    {"name": "deployments", "kind": "Deployment", "namespaced": True, "verbs": ["list"]},
                    {"name": "deployments/scale", "kind": "Scale", "namespaced": True, "verbs": ["get"]},
                    {"name": "replicasets", "kind": "ReplicaSet", "namespaced": True, "verbs": ["list"]},
                ]
            },
            "/openapi/v3/apis/apps/v1": DOCUMENT,
        }

    async def request_bytes(self, method: str, path: str, **kwargs: Any) -> bytes:
        if path == "/api":
            self.discoveries += 1
        if method == "GET" and path in self.answers:
            return json.dumps(self.answers[path]).encode()
        return await super().request_bytes(method, path, **kwargs)


def view(rules: list[dict[str, Any]], validations: list[dict[str, str]]) -> policy.PolicyView:
    doc = {
        "metadata": {"name": "p"},
        "spec": {"matchConstraints": {"resourceRules": rules}, "validations": validations},
    }
    return msgspec.convert(doc, policy.PolicyView)


APPS = {
    "apiGroups": ["apps"],
    "apiVersions": ["v1"],
    "resources": ["deployments", "replicasets", "deployments/scale"],
}


def test_each_expression_and_message_expression_is_checked_against_the_matched_kinds() -> None:
    client = ServedClient()
    checker = typecheck.TypeChecker(client)
    validations = [
        {"expression": "object.spec.replicas > 1", "messageExpression": "object.metadata.namez"},
        {"expression": "object.spec.replicaz > 1"},
        {"expression": "params.x == 1"},  # undecided: no warning
    ]
    warnings = asyncio.run(checker.check(view([APPS], validations)))
    assert warnings == [
        {
            "fieldRef": "spec.validations[0].messageExpression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:16: undefined field 'namez'\n"
            " | object.metadata.namez\n | ...............^\n",
        },
        {
            "fieldRef": "spec.validations[1].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n"
            " | object.spec.replicaz > 1\n | ...........^\n",
        },
    ]
    assert client.discoveries == 1


def test_wildcards_and_unknown_resources_are_not_checked() -> None:
    client = ServedClient()
    checker = typecheck.TypeChecker(client)
    typo = [{"expression": "object.spec.replicaz > 1"}]
    star = {"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["deployments"]}
    assert asyncio.run(checker.check(view([star], typo))) == []
    unknown = {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["widgets", "gadgets"]}
    assert asyncio.run(checker.check(view([unknown], typo))) == []
    assert client.discoveries == 2  # the miss refreshed discovery once, as upstream's RESTMapper
