"""The Kubernetes manifests under k8s/, checked without a cluster.

Each overlay is rendered with `kubectl kustomize` and every object validated against the
Kubernetes OpenAPI schemas (kubernetes-validate); then the manifests are cross-checked with
the code they deploy: every container runs a real `kcm` subcommand whose flags parse, probes
and scrape annotations name the port and paths the service serves, every builtin controller
has its own Deployment, ServiceAccount and RBAC, and the hardening the issue asks for
(non-root, read-only root filesystem, no privilege escalation, resources) is on every pod.
NATS is locked down: its config includes the authorization `kcm nats-auth` generates, from a
Secret; every kcm pod connects with its own identity's seed Secret (the Secrets the step
writes are exactly those the manifests mount), NetworkPolicies cover 4222 and the ops ports and
let no pod reach the monitoring port, and production's cluster routes take only the route
certificate (mutual TLS, its subject the route's user) from the operator's Secret.
The rendering and RBAC helpers are tests/support/k8s.py, shared with the end-to-end test in
tests/e2e/test_deploy_manifests.py.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from kcm_cli import controllers, natsauth
from kcm_shared.runtime import controllerflags

from tests.support.k8s import (
    CRD_KINDS,
    KUBERNETES_VERSION,
    NAMESPACE,
    OVERLAYS,
    REPO,
    Obj,
    allowed,
    image_repo,
    kcm_workloads,
    of_kind,
    ops_port,
    parsed_args,
    pod_spec,
    render,
    request_attributes,
    rule_allows,
    workloads,
)

# --- the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_against_the_kubernetes_schemas(overlay: str) -> None:
    objs = render(f"overlays/{overlay}")
    assert objs
    for obj in objs:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_optional_servicemonitor_component_renders_into_an_overlay(tmp_path: Path) -> None:
    objs = render("components/servicemonitor")
    (monitor,) = of_kind(objs, "ServiceMonitor")
    (service,) = of_kind(objs, "Service")
    kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)
    assert service["spec"]["selector"] == {"app.kubernetes.io/part-of": "kcm"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {p["name"] for p in service["spec"]["ports"]}
    # Each kcm container serves /metrics on one of the ports it scrapes: `ops` (watcher,
    # coordinator) or `https` (the controllers' secure port, scraped with a token over TLS).
    targets = {p["targetPort"] for p in service["spec"]["ports"]}
    for w in kcm_workloads(render("overlays/dev")):
        assert targets & {p["name"] for p in pod_spec(w)["containers"][0]["ports"]}
    (secure,) = [e for e in monitor["spec"]["endpoints"] if e["port"] == "https"]
    assert secure["scheme"] == "https" and secure["bearerTokenFile"]
    (reader,) = of_kind(objs, "ClusterRole")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_schema_validation_can_fail() -> None:
    (dep, *_) = of_kind(render("overlays/dev"), "Deployment")
    broken = {**dep, "spec": {**dep["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_kcm_container_runs_a_kcm_subcommand_whose_flags_parse(overlay: str) -> None:
    for w in kcm_workloads(render(f"overlays/{overlay}")):
        for container in pod_spec(w)["containers"]:
            args = parsed_args(container)  # SystemExit or pflag.FlagError if it would not start
            assert args.command in ("watcher", "coordinator", "controller", "controllers"), w["metadata"][
                "name"
            ]
            assert args.nats_url == "nats://kcm-nats:4222"
            assert args.kubeconfig is None  # in-cluster: the pod's own ServiceAccount


def test_every_builtin_controller_has_its_own_deployment_and_service_account() -> None:
    objs = render("overlays/dev")
    running: dict[str, Obj] = {}
    for w in kcm_workloads(objs):
        args = parsed_args(pod_spec(w)["containers"][0])
        if args.command == "controller":
            (spec,) = controllerflags.select(controllers.BUILTIN, args.name)
            assert spec.name not in running, f"{spec.name} deployed twice"
            running[spec.name] = w
    assert set(running) == {spec.name for spec in controllers.BUILTIN}
    accounts = {o["metadata"]["name"] for o in of_kind(objs, "ServiceAccount")}
    for name, w in running.items():
        sa = pod_spec(w)["serviceAccountName"]
        assert sa in accounts
        others = [pod_spec(x).get("serviceAccountName") for x in workloads(objs) if x is not w]
        assert sa not in others, f"{name} shares its ServiceAccount"


# Controllers that record no Event, so their Roles grant none (upstream's neither).
RECORDS_NO_EVENTS = {
    "validatingadmissionpolicy-status-controller",
    "clusterrole-aggregation-controller",
    "namespace-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "resourcequota-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "ttl-controller",
    "certificatesigningrequest-signing-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "bootstrap-signer-controller",
    "token-cleaner-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
}


def test_controllers_may_list_what_their_caches_hold() -> None:
    """Before acting, a replica lists each cached resource (limit=1) to learn the API server's
    resourceVersion (kcm_shared.runtime, invariant 6): its Role must allow that list."""
    objs = render("overlays/dev")
    for w in kcm_workloads(objs):
        args = parsed_args(pod_spec(w)["containers"][0])
        if args.command != "controller":
            continue
        (spec,) = controllerflags.select(controllers.BUILTIN, args.name)
        sa = pod_spec(w)["serviceAccountName"]
        for res in spec.views:
            path = (
                f"/apis/{res.group}/{res.version}/{res.resource}" if res.group else f"/api/v1/{res.resource}"
            )
            assert allowed(objs, sa, request_attributes("GET", path + "?limit=1")), f"{spec.name}: list {res}"
        if spec.name in RECORDS_NO_EVENTS:
            continue
        # Events with upstream reasons, in any namespace.
        for method in ("POST", "PATCH"):
            ev = request_attributes(
                method, "/api/v1/namespaces/x/events" + ("/e" if method == "PATCH" else "")
            )
            assert allowed(objs, sa, ev), f"{spec.name}: {ev}"


def test_leader_election_leases_are_granted_in_the_lease_namespace_only() -> None:
    objs = render("overlays/dev")
    for w in kcm_workloads(objs):
        args = parsed_args(pod_spec(w)["containers"][0])
        if args.command not in ("watcher", "coordinator"):
            continue
        sa = pod_spec(w)["serviceAccountName"]
        assert args.leader_elect_resource_namespace == NAMESPACE
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
        name = args.leader_elect_resource_name
        for method, url in (("GET", f"{lease}/{name}"), ("PUT", f"{lease}/{name}"), ("POST", lease)):
            assert allowed(objs, sa, request_attributes(method, url)), f"{sa}: {method} {url}"
        assert not allowed(objs, sa, request_attributes("PUT", f"{lease}/someone-else"))
        assert not allowed(
            objs,
            sa,
            request_attributes("PUT", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}"),
        )


def test_rbac_matching_follows_upstream() -> None:
    """The matcher the end-to-end RBAC check relies on, on cases with known answers."""
    a = request_attributes("GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=1")
    assert (a.verb, a.group, a.resource, a.namespace, a.name) == ("watch", "", "pods", "ns", "")
    a = request_attributes("PATCH", "/apis/apps/v1/namespaces/ns/replicasets/rs/status")
    assert (a.verb, a.group, a.resource, a.subresource, a.name) == (
        "patch",
        "apps",
        "replicasets",
        "status",
        "rs",
    )
    a = request_attributes("GET", "/api/v1/namespaces/ns")
    assert (a.verb, a.resource, a.name, a.namespace) == ("get", "namespaces", "ns", "ns")
    assert request_attributes("DELETE", "/api/v1/namespaces/ns/pods").verb == "deletecollection"
    assert not request_attributes("GET", "/apis/apps/v1").resource_request
    rule = {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["update"]}
    assert rule_allows(rule, request_attributes("PUT", "/apis/apps/v1/namespaces/n/replicasets/x"))
    assert not rule_allows(rule, request_attributes("PUT", "/apis/apps/v1/namespaces/n/replicasets/x/status"))
    assert rule_allows(
        {**rule, "resources": ["*"]},
        request_attributes("PUT", "/apis/apps/v1/namespaces/n/replicasets/x/status"),
    )
    assert not rule_allows(
        {**rule, "resourceNames": ["y"]},
        request_attributes("PUT", "/apis/apps/v1/namespaces/n/replicasets/x"),
    )
    assert rule_allows(
        {"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}, request_attributes("GET", "/apis/apps/v1")
    )


def test_the_watcher_may_read_everything_and_write_nothing_but_its_lease() -> None:
    objs = render("overlays/dev")
    assert allowed(objs, "kcm-watcher", request_attributes("GET", "/apis/example.com/v1/widgets?watch=1"))
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert not allowed(objs, "kcm-watcher", request_attributes(method, "/api/v1/namespaces/x/pods/p"))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_are_hardened_probed_and_sized(overlay: str) -> None:
    for w in workloads(render(f"overlays/{overlay}")):
        name = w["metadata"]["name"]
        spec = pod_spec(w)
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] > 0, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), name
            assert "memory" in c["resources"]["limits"], name
            assert c["livenessProbe"] and c["readinessProbe"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_and_scrape_annotations_name_the_port_and_paths_the_service_serves(overlay: str) -> None:
    # kcm_shared.bus.opsserver serves these on --ops-port; /livez and /readyz are each process's
    # own checks (the coordinator's aggregate of the controllers' health is /healthz only). The
    # controllers serve them on upstream's secure port, probed as kubeadm probes
    # kube-controller-manager: /healthz over HTTPS (a controller has no aggregated check).
    for w in kcm_workloads(render(f"overlays/{overlay}")):
        name = w["metadata"]["name"]
        c = pod_spec(w)["containers"][0]
        port = ops_port(c)
        secure = parsed_args(c).command == "controller"
        port_name, scheme, live = ("https", "HTTPS", "/healthz") if secure else ("ops", "HTTP", "/livez")
        (served,) = [p for p in c["ports"] if p["name"] == port_name]
        assert served["containerPort"] == port, name
        for probe, path in ((c["livenessProbe"], live), (c["readinessProbe"], "/readyz")):
            assert probe["httpGet"]["port"] in (port_name, port), name
            assert probe["httpGet"]["path"] == path, name
            assert probe["httpGet"].get("scheme", "HTTP") == scheme, name
        notes = w["spec"]["template"]["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true", name
        assert notes["prometheus.io/port"] == str(port), name
        assert notes["prometheus.io/path"] == "/metrics", name
        assert notes.get("prometheus.io/scheme", "http") == scheme.lower(), name


def test_watcher_and_coordinator_run_with_standbys_and_disruption_budgets() -> None:
    for overlay in OVERLAYS:
        objs = render(f"overlays/{overlay}")
        budgets = {
            tuple(sorted(p["spec"]["selector"]["matchLabels"].items()))
            for p in of_kind(objs, "PodDisruptionBudget")
        }
        for w in workloads(objs):
            assert tuple(sorted(w["spec"]["selector"]["matchLabels"].items())) in budgets, w["metadata"][
                "name"
            ]
        for w in kcm_workloads(objs):
            if parsed_args(pod_spec(w)["containers"][0]).command in ("watcher", "coordinator"):
                assert w["spec"]["replicas"] >= 2, w["metadata"]["name"]


def test_nats_is_a_statefulset_with_jetstream_on_volumes_three_in_production() -> None:
    for overlay, replicas in (("dev", 1), ("production", 3)):
        objs = render(f"overlays/{overlay}")
        (sts,) = of_kind(objs, "StatefulSet")
        assert sts["spec"]["replicas"] == replicas
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        mounts = {m["name"]: m["mountPath"] for m in pod_spec(sts)["containers"][0]["volumeMounts"]}
        assert mounts[claim["metadata"]["name"]] == "/data"
        conf = nats_conf(objs)
        assert re.search(r"jetstream\s*\{\s*store_dir:\s*/data", conf)
        routes = re.findall(r"nats://kcm-nats-(\d)\.kcm-nats-headless:6222", conf)
        assert sorted(int(r) for r in routes) == (list(range(replicas)) if replicas > 1 else [])
        # Every service declares streams: each keeps as many copies as there are servers.
        for w in kcm_workloads(objs):
            args = parsed_args(pod_spec(w)["containers"][0])
            assert args.nats_stream_replicas == replicas, (overlay, w["metadata"]["name"])


def policy(objs: tuple[Obj, ...], name: str) -> Obj:
    return next(o for o in of_kind(objs, "NetworkPolicy") if o["metadata"]["name"] == name)


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    """A label selector's matchLabels and In/NotIn matchExpressions, as the API server reads them."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        inside = labels.get(expr["key"]) in expr["values"]
        if inside != {"In": True, "NotIn": False}[expr["operator"]]:
            return False
    return True


def test_only_kcm_pods_reach_nats() -> None:
    objs = render("overlays/dev")
    policy_ = policy(objs, "kcm-nats")
    (sts,) = of_kind(objs, "StatefulSet")
    assert selects(policy_["spec"]["podSelector"], sts["spec"]["template"]["metadata"]["labels"])
    client_rule = next(
        r for r in policy_["spec"]["ingress"] if {"port": 4222, "protocol": "TCP"} in r["ports"]
    )
    selectors = [peer["podSelector"]["matchLabels"] for peer in client_rule["from"]]
    assert all("namespaceSelector" not in peer for peer in client_rule["from"])
    for w in kcm_workloads(objs):
        labels = w["spec"]["template"]["metadata"]["labels"]
        assert any(sel.items() <= labels.items() for sel in selectors), w["metadata"]["name"]


def _block(conf: str, name: str) -> str | None:
    """The body of the top-level `name { ... }` block of a nats.conf, braces balanced."""
    m = re.search(rf"^\s*{name}\s*\{{", conf, re.MULTILINE)
    if m is None:
        return None
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(conf[i], 0)
        i += 1
    return conf[m.end() : i - 1]


def _setting(block: str, key: str) -> str:
    (value,) = re.findall(rf"^\s*{key}\s*[:=]\s*(.+?)\s*$", block, re.MULTILINE)
    return value.strip('"')


def nats_conf(objs: tuple[Obj, ...]) -> str:
    config = next(
        o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("kcm-nats-config")
    )
    conf: str = config["data"]["nats.conf"]
    return conf


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nats_routes_take_only_a_route_certificate_of_the_operators_ca(overlay: str) -> None:
    """A route port that answers is authenticated by mutual TLS and the certificate's subject;
    a single server (dev, compose) listens for no routes at all."""
    objs = render(f"overlays/{overlay}")
    (sts,) = of_kind(objs, "StatefulSet")
    cluster = _block(nats_conf(objs), "cluster")
    if sts["spec"]["replicas"] == 1:
        assert cluster is None, "one server needs no route port"
        return
    assert cluster is not None
    authorization, tls = _block(cluster, "authorization"), _block(cluster, "tls")
    assert authorization is not None and tls is not None, "routes without authorization or TLS"
    assert _setting(authorization, "user") == "CN=kcm-nats-route"
    assert _setting(tls, "verify_and_map") == "true"  # the subject is the route's user
    container = pod_spec(sts)["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(sts)["volumes"]}
    for key in ("cert_file", "key_file", "ca_file"):
        path = Path(_setting(tls, key))
        assert volumes[mounts[str(path.parent)]]["secret"]["secretName"] == "kcm-nats-cluster-tls", key
    # Servers advertise the names in the certificate, which the routes dial, not pod IPs.
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert _setting(cluster, "advertise") == "$CLUSTER_ADVERTISE"
    assert env["CLUSTER_ADVERTISE"] == "$(POD_NAME).kcm-nats-headless:6222"
    assert re.findall(r"nats://kcm-nats-\d\.(kcm-nats-headless):6222", cluster)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_pod_reaches_the_nats_monitoring_port(overlay: str) -> None:
    """8222 has no authentication and lists every connection and consumer: only the kubelet's
    probes (from the node) reach it."""
    objs = render(f"overlays/{overlay}")
    policy_ = policy(objs, "kcm-nats")
    (sts,) = of_kind(objs, "StatefulSet")
    assert selects(policy_["spec"]["podSelector"], sts["spec"]["template"]["metadata"]["labels"])
    assert policy_["spec"]["policyTypes"] == ["Ingress"]
    ports = {p["name"]: p["containerPort"] for p in pod_spec(sts)["containers"][0]["ports"]}
    assert ports["monitor"] == 8222
    for rule in policy_["spec"]["ingress"]:
        assert rule.get("ports"), "a rule without ports opens every port"
        for port in rule["ports"]:
            assert port["port"] not in (8222, "monitor"), rule["from"]


def test_the_ops_ports_answer_only_the_monitoring_namespace() -> None:
    objs = render("overlays/production")
    ops = policy(objs, "kcm-ops")
    assert ops["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = ops["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kcm.io/metrics": "true"}}}]
    assert rule["ports"] == [{"port": "ops", "protocol": "TCP"}, {"port": "https", "protocol": "TCP"}]
    (sts,) = of_kind(objs, "StatefulSet")
    assert not selects(ops["spec"]["podSelector"], sts["spec"]["template"]["metadata"]["labels"])
    served = set()
    for w in kcm_workloads(objs):
        assert selects(ops["spec"]["podSelector"], w["spec"]["template"]["metadata"]["labels"])
        container = pod_spec(w)["containers"][0]
        (port,) = container["ports"]  # the ops port (or the secure one) is all a kcm pod serves
        assert port["name"] in ("ops", "https")
        served.add(port["containerPort"])
    assert served == {10257, 10258}


def _auth_include(conf: str) -> str:
    (include,) = re.findall(r'^include\s+"([^"]+)"', conf, re.MULTILINE)
    return include


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nats_wants_the_generated_credentials_and_takes_the_largest_object(overlay: str) -> None:
    objs = render(f"overlays/{overlay}")
    (sts,) = of_kind(objs, "StatefulSet")
    conf = nats_conf(objs)
    assert re.search(r"^max_payload: 8MB$", conf, re.MULTILINE)
    assert re.search(r"^max_pending: 64MB$", conf, re.MULTILINE)
    container = pod_spec(sts)["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config_dir = Path(container["args"][container["args"].index("--config") + 1]).parent
    included = (config_dir / _auth_include(conf)).resolve()
    assert included.name == natsauth.AUTH_CONF
    volumes = {v["name"]: v for v in pod_spec(sts)["volumes"]}
    assert volumes[mounts[str(included.parent)]]["secret"]["secretName"] == natsauth.SERVER_SECRET


def test_every_nats_client_mounts_its_own_identity_and_the_step_makes_every_secret(tmp_path: Path) -> None:
    objs = render("overlays/production")
    identities = natsauth.deployment_identities(controllers.BUILTIN)
    mounted = {natsauth.SERVER_SECRET}
    for w in kcm_workloads(objs):
        spec = pod_spec(w)
        container = spec["containers"][0]
        args = parsed_args(container)
        seed = Path(args.nats_nkey_seed)
        assert args.nats_password is None and args.nats_token is None
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        secret = {v["name"]: v for v in spec["volumes"]}[mounts[str(seed.parent)]]["secret"]
        identity = w["metadata"]["name"].removeprefix("kcm-")
        assert identity in identities
        assert secret["secretName"] == natsauth.secret_name(identity) and seed.name == "nkey"
        assert spec["securityContext"]["fsGroup"] == spec["securityContext"]["runAsGroup"]
        assert secret["defaultMode"] == 0o440  # its group (fsGroup) reads it, nobody else
        mounted.add(secret["secretName"])
    natsauth.generate(tmp_path, controllers.BUILTIN, k8s_namespace=NAMESPACE)
    made = yaml.safe_load((tmp_path / "k8s-secrets.yaml").read_text())["items"]
    assert {s["metadata"]["name"] for s in made} == mounted | {natsauth.secret_name("consumer")}
    assert {s["metadata"]["namespace"] for s in made} == {NAMESPACE}
    # `data`, never `stringData`: nothing of a seed readable in the manifest at a glance.
    assert all(set(s) == {"apiVersion", "kind", "metadata", "type", "data"} for s in made)
    seed = (tmp_path / "consumer.nk").read_bytes()
    consumer = next(s for s in made if s["metadata"]["name"] == natsauth.secret_name("consumer"))
    assert base64.b64decode(consumer["data"]["nkey"]) == seed


def test_compose_and_k8s_deploy_the_same_images() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = dict(
        line.split("=", 1)
        for line in (REPO / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    compose_images = {
        re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], s["image"])
        for s in compose["services"].values()
        # k3s stands in for a cluster and Jaeger is the local trace viewer: neither is ours to deploy.
        if not s["image"].startswith(("${K3S", "${JAEGER"))
    }
    k8s_images = {c["image"] for w in workloads(render("overlays/dev")) for c in pod_spec(w)["containers"]}
    assert compose_images == k8s_images
    prod = {
        image_repo(c["image"]).rsplit("/", 1)[-1]
        for w in workloads(render("overlays/production"))
        for c in pod_spec(w)["containers"]
    }
    assert prod == {i.split(":")[0] for i in k8s_images}


def test_the_deploying_doc_applies_overlays_that_exist() -> None:
    text = (REPO / "docs" / "deploying.md").read_text()
    applied = re.findall(r"kubectl apply -k ([\w./-]+)", text)
    assert applied
    for path in applied:
        assert (REPO / path / "kustomization.yaml").is_file(), path
