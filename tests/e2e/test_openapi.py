"""kubectl's OpenAPI needs against the embedded API server alone (`kcm apiserver`, no controllers).

kubectl validates every item of a `kind: List` on the client against /openapi/v2 (server-side
field validation cannot take a List), so `kubectl create -f` and `apply -f` of what
`kubectl get -o yaml` prints need that document; single objects are validated by the server.
"""

from __future__ import annotations

import copy
import json
import uuid

import requests

from tests.conftest import ApiServer, wait_for
from tests.support.crontab import CRONTAB_SCHEMA, crontab_crd

LIST = """
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, labels: {app: web}}
  spec:
    replicas: 2
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers:
        - {name: web, image: "nginx:1.25", ports: [{containerPort: 80}]}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings}
  data: {mode: fast}
- apiVersion: v1
  kind: Service
  metadata: {name: web}
  spec:
    selector: {app: web}
    ports: [{port: 80, targetPort: 8080}]
"""

OBJECTS = ["deployment.apps/web", "configmap/settings", "service/web"]

# The unit tests' CronTab, with a required field for kubectl's client-side validation to miss.
SCHEMA = copy.deepcopy(CRONTAB_SCHEMA)
SCHEMA["properties"]["spec"]["required"] = ["cronSpec"]
CRD = crontab_crd(SCHEMA)


def namespace(apiserver: ApiServer) -> str:
    name = f"oa-{uuid.uuid4().hex[:8]}"
    apiserver.kubectl("create", "namespace", name)
    return name


def names(apiserver: ApiServer, ns: str) -> list[str]:
    out = apiserver.kubectl("-n", ns, "get", "deployment,configmap,service", "-o", "name")
    return sorted(line for line in out.split() if line != "configmap/kube-root-ca.crt")


def test_create_list_then_recreate_what_get_printed(apiserver: ApiServer) -> None:
    ns = namespace(apiserver)
    out = apiserver.kubectl("-n", ns, "create", "-f", "-", input=LIST)
    assert out.split("\n")[:3] == [f"{o} created" for o in OBJECTS]
    assert names(apiserver, ns) == sorted(OBJECTS)
    printed = apiserver.kubectl("-n", ns, "get", *OBJECTS, "-o", "yaml")
    assert printed.startswith("apiVersion: v1\nitems:")
    apiserver.kubectl("-n", ns, "delete", *OBJECTS)
    apiserver.kubectl("-n", ns, "create", "-f", "-", input=printed)
    assert names(apiserver, ns) == sorted(OBJECTS)


def test_apply_list_twice_is_unchanged(apiserver: ApiServer) -> None:
    ns = namespace(apiserver)
    first = apiserver.kubectl("-n", ns, "apply", "-f", "-", input=LIST)
    assert first.split("\n")[:3] == [f"{o} created" for o in OBJECTS]
    second = apiserver.kubectl("-n", ns, "apply", "-f", "-", input=LIST)
    assert second.split("\n")[:3] == [f"{o} unchanged" for o in OBJECTS]
    assert apiserver.kubectl_json("-n", ns, "get", "deployment", "web")["spec"]["replicas"] == 2


def test_explain_from_v3_and_from_v2(apiserver: ApiServer) -> None:
    for output in ("plaintext", "plaintext-openapiv2"):
        out = apiserver.kubectl("explain", "deployment.spec.replicas", f"--output={output}")
        assert "replicas" in out and "<integer>" in out and "Number of desired pods" in out


def test_unknown_fields_get_upstreams_answers(apiserver: ApiServer) -> None:
    ns = namespace(apiserver)
    one = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndata: {a: b}\nspec: {foo: 1}\n"
    out = apiserver.kubectl("-n", ns, "create", "-f", "-", "--validate=strict", input=one, check=False)
    assert (
        'Error from server (BadRequest): error when creating "STDIN": ConfigMap in version "v1" cannot be '
        'handled as a ConfigMap: strict decoding error: unknown field "spec"'
    ) in out
    out = apiserver.kubectl("-n", ns, "create", "-f", "-", "--validate=warn", input=one, check=False)
    assert 'Warning: unknown field "spec"' in out and "configmap/typo created" in out
    # A hostile field name comes back quoted as Go's %q does, in a Warning header kubectl can read.
    hostile = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile"}, 'a"b\nc\x7f': 1}
    out = apiserver.kubectl(
        "-n", ns, "create", "-f", "-", "--validate=warn", input=json.dumps(hostile), check=False
    )
    assert 'Warning: unknown field "a\\"b\\nc\\x7f"' in out and "configmap/hostile created" in out

    item = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typo2"}, "foo": 1}
    in_list = json.dumps({"apiVersion": "v1", "kind": "List", "items": [item]})
    out = apiserver.kubectl("-n", ns, "create", "-f", "-", "--validate=strict", input=in_list, check=False)
    assert 'ValidationError(ConfigMap): unknown field "foo" in io.k8s.api.core.v1.ConfigMap' in out
    assert "NotFound" in apiserver.kubectl("-n", ns, "get", "configmap", "typo2", check=False)


def test_unknown_fields_are_dropped_unless_strict(apiserver: ApiServer) -> None:
    """As upstream stores only what its types (or a CRD's structural schema) know, Warn and
    Ignore keep the object without its unknown fields; a patch's are dropped too."""
    ns = namespace(apiserver)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "nmae": "x"}, "spec": 1}
    apiserver.kubectl("-n", ns, "create", "-f", "-", "--validate=warn", input=json.dumps(cm))
    stored = apiserver.kubectl_json("-n", ns, "get", "configmap", "kept")
    assert "spec" not in stored and "nmae" not in stored["metadata"], stored
    cm["metadata"]["name"] = "quiet"
    out = apiserver.kubectl(
        "-n", ns, "create", "-f", "-", "--validate=false", input=json.dumps(cm), check=False
    )
    assert "Warning" not in out and "configmap/quiet created" in out
    assert "spec" not in apiserver.kubectl_json("-n", ns, "get", "configmap", "quiet")
    apiserver.kubectl(
        "-n", ns, "patch", "configmap", "kept", "--type=merge", "-p", '{"data": {"a": "b"}, "bogus": 1}'
    )
    patched = apiserver.kubectl_json("-n", ns, "get", "configmap", "kept")
    assert patched["data"] == {"a": "b"} and "bogus" not in patched

    # A group of its own: the OpenAPI test below watches the CronTab CRD arrive.
    crd = copy.deepcopy(CRD)
    crd["metadata"]["name"] = "crontabs.pruning.example.com"
    crd["spec"]["group"] = "pruning.example.com"
    apiserver.kubectl("apply", "-f", "-", input=json.dumps(crd))
    wait_for(
        lambda: requests.get(f"{apiserver.url}/apis/pruning.example.com/v1", timeout=10).status_code == 200,
        30,
        what="the CronTab API",
    )
    tab = {
        "apiVersion": "pruning.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "pruned"},
        "spec": {"cronSpec": "* * * * *", "cronspec": "typo", "extra": {"free": {"form": 1}}},
    }
    url = f"{apiserver.url}/apis/pruning.example.com/v1/namespaces/{ns}/crontabs"
    r = requests.post(url, params={"fieldValidation": "Warn"}, json=tab, timeout=30)
    assert r.status_code == 201, r.text
    assert r.headers["Warning"] == '299 - "unknown field \\"spec.cronspec\\""'
    assert r.json()["spec"] == {"cronSpec": "* * * * *", "extra": {"free": {"form": 1}}}


def test_v2_document_is_negotiated_cached_and_follows_crds(apiserver: ApiServer) -> None:
    url = f"{apiserver.url}/openapi/v2"
    r = requests.get(url, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    doc = r.json()
    deployment = doc["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    etag = r.headers["ETag"]
    assert requests.get(url, headers={"If-None-Match": etag}, timeout=30).status_code == 304
    pb = requests.get(
        url, headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}, timeout=30
    )
    assert pb.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert pb.content.startswith(b"\n\x032.0")  # field 1, swagger: "2.0"
    assert requests.get(url, headers={"Accept": "text/html"}, timeout=30).status_code == 406

    apiserver.kubectl("apply", "-f", "-", input=json.dumps(CRD))
    after = requests.get(url, headers={"If-None-Match": etag}, timeout=30)
    assert after.status_code == 200 and after.headers["ETag"] != etag
    crontab = after.json()["definitions"]["com.example.stable.v1.CronTab"]
    assert crontab["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    ns = namespace(apiserver)
    bad = {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}, "spec": {}}
    out = apiserver.kubectl(
        "-n",
        ns,
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [bad]}),
        check=False,
    )
    assert 'missing required field "cronSpec" in com.example.stable.v1.CronTab.spec' in out


def test_bad_write_options_are_refused_as_upstream(apiserver: ApiServer) -> None:
    ns = namespace(apiserver)
    url = f"{apiserver.url}/api/v1/namespaces/{ns}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "opts"}}
    r = requests.post(url, params={"fieldValidation": "strict"}, json=body, timeout=30)
    assert r.status_code == 422, r.text
    assert r.json()["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
    r = requests.patch(
        f"{url}/opts", data="{}", headers={"Content-Type": "application/apply-patch+yaml"}, timeout=30
    )
    assert r.status_code == 422, r.text
    assert r.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    # Reads take no write options.
    assert requests.get(url, params={"fieldValidation": "strict"}, timeout=30).status_code == 200
