"""`kcm manifests`: each built-in controller's deployment, written from its own folder.

A controller's folder holds `deploy.yaml`: the name of its ServiceAccount (upstream's, from
bootstrappolicy's controller_policy.go), its replica count, and its ClusterRole's `rules`,
with comments saying why each rule is there. From it and the controller's Spec this writes
k8s/base/controllers/<alias>.yaml (ServiceAccount, ClusterRole, bindings: its own role,
system:auth-delegator and the authentication ConfigMap reader its secure port needs; Deployment
probed on the secure port, PodDisruptionBudget), the controllers' entries in k8s/base/kustomization.yaml and their
services in docker-compose.yml, so that adding a controller touches only its folder and the
launcher's registry; and the compose stack's per-identity NATS seed volumes (one per identity,
each mounted by its own service alone, and by the one-shot `nats-auth` that fills them).
`make manifests` runs it; `--check` (what the tests run) fails when a
committed file differs from what it would write.

`rbac(root, specs)` gives the RBAC objects alone (ServiceAccounts, roles and bindings of the
watcher, the coordinator and the controllers, in `kcm-system`), for `kcm dev --apiserver=upstream`
to apply as they are deployed; `service_account_credentials(user)` the role that lets the
identity of a `--use-service-account-credentials` controller process request its controllers'
tokens there, and nothing else. The Deployments here run each controller as its own
ServiceAccount already, so they need neither that flag nor that role.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kcm_shared import runtime
from kcm_shared.runtime import deployfile

from kcm_cli import natsauth
from kcm_cli.controllers import BUILTIN

SECURE_PORT = 10257  # every controller service's /healthz and /metrics: upstream's secure port
AUTH_READER = "kcm:extension-apiserver-authentication-reader"  # k8s/base/secure-serving.yaml
NAMESPACE = "kcm-system"  # what k8s/base/kustomization.yaml deploys into
RBAC_KINDS = frozenset({"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})
NAMESPACED = frozenset({"ServiceAccount", "Role", "RoleBinding"})
SERVICE_ACCOUNT_CREDENTIALS_ROLE = "kcm:controllers:service-account-credentials"
BEGIN = "# --- controllers: written by `make manifests` from each controller's deploy.yaml ---"
END = "# --- end of controllers ---"
SEED_MOUNTS = (
    "# --- seed mounts: written by `make manifests`, one volume per NATS identity ---",
    "# --- end of seed mounts ---",
)
SEED_VOLUMES = (
    "# --- seed volumes: written by `make manifests`, one per NATS identity ---",
    "# --- end of seed volumes ---",
)
KUBE_MOUNTS = (
    "# --- kubeconfig mounts: written by `make manifests`, one volume per ServiceAccount ---",
    "# --- end of kubeconfig mounts ---",
)
KUBE_VOLUMES = (
    "# --- kubeconfig volumes: written by `make manifests`, one per ServiceAccount ---",
    "# --- end of kubeconfig volumes ---",
)
KUBE_DIR = "/kube"  # where a compose service finds its own kubeconfig (`kcm kube-identities`)
IDENTITIES = "/identities"  # where compose's kube-identities mounts each one, a directory each
SEED_DIR = "/etc/kcm-nats"  # where a service finds its own seed (key `nkey`), in k8s/ and compose
SEEDS = "/seeds"  # where compose's nats-auth mounts every identity's volume, one directory each
# The self-signed certificate is not checked: the probe asks only whether the process answers.
_PROBE = (
    f"urllib.request.urlopen('https://127.0.0.1:{SECURE_PORT}/healthz', timeout=2, "
    "context=ssl._create_unverified_context())"
)
HEALTHCHECK = f'["CMD", "python", "-c", "import ssl, urllib.request; {_PROBE}"]'


@dataclass(frozen=True)
class Deploy:
    """What a controller's `deploy.yaml` says."""

    spec: runtime.Spec
    service_account: str
    replicas: int
    rules: str  # the `rules:` block as written, comments and all
    args: tuple[str, ...] = ()  # flags beyond the NATS and ops ones, e.g. files in a mount
    mounts: tuple[tuple[str, str], ...] = ()  # (Secret name, where it is mounted), read-only


def load(spec: runtime.Spec) -> Deploy:
    """The `deploy.yaml` in the controller's folder, the package its Spec names."""
    file = deployfile.read(spec)
    data, where, text = file.data, file.where, file.text
    if not isinstance(data.get("rules"), list):
        raise ValueError(f"{where}: want a mapping with a `rules` list")
    sa, replicas = file.service_account, data.get("replicas")
    if not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"{where}: want replicas (>= 1)")
    args, mounts = data.get("args") or [], data.get("mounts") or {}
    if not (isinstance(args, list) and all(isinstance(a, str) and a.startswith("--") for a in args)):
        raise ValueError(f"{where}: `args` wants a list of --flag=value strings")
    if not (
        isinstance(mounts, dict) and all(isinstance(v, str) and v.startswith("/") for v in mounts.values())
    ):
        raise ValueError(f"{where}: `mounts` wants Secret name: absolute path")
    rules = text[text.index("\nrules:") + len("\nrules:") :].strip("\n")
    return Deploy(spec, sa, replicas, rules, tuple(args), tuple(mounts.items()))


def compose_volume(secret: str) -> str:
    """The named compose volume that stands for Secret `secret` (its `kcm-` dropped): the
    compose file declares it and its one-shot `nats-auth` service fills it."""
    return secret.removeprefix("kcm-")


def _binding(name: str, cluster_role: str, service_account: str) -> str:
    return f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {name}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {cluster_role}
subjects:
  - kind: ServiceAccount
    name: {service_account}
    namespace: kcm-system
"""


def k8s_manifest(d: Deploy) -> str:
    alias, name, sa = d.spec.alias, d.spec.name, d.service_account
    args = "".join(f"            - {a}\n" for a in d.args)
    mounts = "".join(
        f"            - name: {n}\n              mountPath: {m}\n              readOnly: true\n"
        for n, m in d.mounts
    )
    volumes = "".join(
        f"        - name: {n}\n          secret:\n            secretName: {n}\n            defaultMode: 0440\n"
        for n, _ in d.mounts
    )
    role = f"kcm:controller:{sa}"
    return f"""\
# Written by `make manifests` from services/controllers/kcm_controllers/*/deploy.yaml: edit that.
# The {name} (`kcm controller {alias}`): caches from NATS, writes to the API with
# its own ServiceAccount, as upstream's --use-service-account-credentials arranges.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {role}
rules:
{d.rules}
---
{_binding(role, role, sa)}---
# Its secure port reviews its clients' tokens and permissions with the API server
{_binding(f"{role}:auth-delegator", "system:auth-delegator", sa)}---
# and reads the client CAs the API server publishes (k8s/base/secure-serving.yaml).
{_binding(f"{role}:authentication-reader", AUTH_READER, sa)}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kcm-{alias}
  labels:
    app.kubernetes.io/name: kcm-{alias}
    app.kubernetes.io/component: {alias}
spec:
  replicas: {d.replicas}
  selector:
    matchLabels:
      app.kubernetes.io/name: kcm-{alias}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app.kubernetes.io/name: kcm-{alias}
        app.kubernetes.io/component: {alias}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/scheme: https
        prometheus.io/port: "{SECURE_PORT}"
        prometheus.io/path: /metrics
    spec:
      serviceAccountName: {sa}
      terminationGracePeriodSeconds: 30
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        fsGroup: 10001  # the group of the mounted NATS seed
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: {alias}
          image: kcm
          args:
            - controller
            - {alias}
            - --nats-url=nats://kcm-nats:4222
            - --nats-nkey-seed={SEED_DIR}/{natsauth.SEED_KEY}
{args}          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
          ports:
            - name: https
              containerPort: {SECURE_PORT}
          # As kubeadm probes kube-controller-manager: /healthz over HTTPS, which
          # --authorization-always-allow-paths opens to the kubelet, answered within 15 s and
          # failing 8 times in a row before a restart. A starved node answers late, and a
          # restart re-reads every stream and refills every partition: more load, not less.
          livenessProbe:
            httpGet:
              scheme: HTTPS
              path: /healthz
              port: https
            initialDelaySeconds: 10
            periodSeconds: 10
            timeoutSeconds: 15
            failureThreshold: 8
          readinessProbe:
            httpGet:
              scheme: HTTPS
              path: /readyz
              port: https
            periodSeconds: 5
            failureThreshold: 3
          resources:
            requests:
              cpu: 100m
              memory: 256Mi
            limits:
              memory: 512Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: nats-identity
              mountPath: {SEED_DIR}
              readOnly: true
{mounts}      volumes:
        - name: tmp
          emptyDir: {{}}
        # Its own NATS identity, made by `kcm nats-auth` (docs/deploying.md).
        - name: nats-identity
          secret:
            secretName: {natsauth.secret_name(alias)}
            defaultMode: 0440
{volumes}---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: kcm-{alias}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: kcm-{alias}
"""


def seed_volume(identity: str) -> str:
    """The compose volume holding `identity`'s seed alone, as its Secret does in k8s/."""
    return compose_volume(natsauth.secret_name(identity))


def service_accounts(specs: list[runtime.Spec]) -> dict[str, str]:
    """Each service of compose and k8s/ that talks to the API -> its ServiceAccount in kcm-system."""
    out = {"watcher": "kcm-watcher", "coordinator": "kcm-coordinator"}
    out.update({spec.alias: load(spec).service_account for spec in specs})
    return out


def kube_volume(identity: str) -> str:
    """The compose volume holding `identity`'s kubeconfig and token alone (`kcm kube-identities`)."""
    return f"kube-{identity}"


def compose_service(d: Deploy) -> str:
    alias = d.spec.alias
    extra = "".join(f",\n              {json.dumps(a)}" for a in d.args)
    mounts = [f"{kube_volume(alias)}:{KUBE_DIR}:ro", f"{seed_volume(alias)}:{SEED_DIR}:ro"]
    mounts += [f"{compose_volume(n)}:{m}:ro" for n, m in d.mounts]
    volumes = "".join(f"      - {m}\n" for m in mounts)
    return f"""\
  {alias}:
    <<: *kcm
    command: ["controller", "{alias}", "--kubeconfig", "/kube/kubeconfig", "--master", "${{KCM_MASTER}}",
              "--authentication-kubeconfig", "/kube/kubeconfig", "--authorization-kubeconfig", "/kube/kubeconfig",
              "--nats-url", "nats://nats:4222", "--nats-nkey-seed", "{SEED_DIR}/{natsauth.SEED_KEY}",
              "--log-level", "${{KCM_LOG_LEVEL}}"{extra}]
    volumes:
{volumes}    deploy:
      replicas: {d.replicas}
    healthcheck:
      <<: *healthcheck
      test: {HEALTHCHECK}
"""


def _between(text: str, block: str, where: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """`text` with the lines between the two markers replaced by `block`."""
    begin, end = markers
    try:
        head, rest = text.split(begin + "\n", 1)
        indent = head[head.rindex("\n") + 1 :]
        _, tail = rest.split(indent + end, 1)
    except ValueError:
        raise ValueError(f"{where}: the generated block's markers are missing") from None
    return f"{head}{begin}\n{block}{indent}{end}{tail}"


def render(root: Path, specs: list[runtime.Spec]) -> dict[Path, str]:
    """Every file `kcm manifests` writes under `root`, with its content."""
    deploys = [load(spec) for spec in specs]
    out = {root / "k8s/base/controllers" / f"{d.spec.alias}.yaml": k8s_manifest(d) for d in deploys}
    kustomization = root / "k8s/base/kustomization.yaml"
    entries = "".join(f"  - controllers/{d.spec.alias}.yaml\n" for d in deploys)
    out[kustomization] = _between(kustomization.read_text(), entries, str(kustomization))
    compose = root / "docker-compose.yml"
    services = "\n".join(compose_service(d) for d in deploys)
    text = _between(compose.read_text(), services, str(compose))
    identities = list(natsauth.deployment_identities(specs))
    mounts = "".join(f"      - {seed_volume(i)}:{SEEDS}/{i}\n" for i in identities)
    text = _between(text, mounts, str(compose), SEED_MOUNTS)
    volumes = "".join(f"  {seed_volume(i)}: {{}}\n" for i in identities)
    text = _between(text, volumes, str(compose), SEED_VOLUMES)
    accounts = list(service_accounts(specs))
    mounts = "".join(f"      - {kube_volume(i)}:{IDENTITIES}/{i}\n" for i in accounts)
    text = _between(text, mounts, str(compose), KUBE_MOUNTS)
    volumes = "".join(f"  {kube_volume(i)}: {{}}\n" for i in accounts)
    out[compose] = _between(text, volumes, str(compose), KUBE_VOLUMES)
    return out


def rbac(root: Path, specs: list[runtime.Spec]) -> list[dict[str, Any]]:
    """The RBAC objects of k8s/base/watcher.yaml, coordinator.yaml, secure-serving.yaml and each controller's manifest
    (written from its deploy.yaml as `render` writes it), with the namespace kustomize sets."""
    names = ("watcher.yaml", "coordinator.yaml", "secure-serving.yaml")
    texts = [(root / "k8s/base" / name).read_text() for name in names]
    texts += [k8s_manifest(load(spec)) for spec in specs]
    out = []
    for doc in (d for text in texts for d in yaml.safe_load_all(text)):
        if isinstance(doc, dict) and doc.get("kind") in RBAC_KINDS:
            if doc["kind"] in NAMESPACED:
                doc["metadata"]["namespace"] = NAMESPACE
            out.append(doc)
    return out


def service_account_credentials(user: str) -> list[dict[str, Any]]:
    """A ClusterRole to read, create and request tokens of ServiceAccounts (what upstream's
    client builder does with the root identity), bound to `user` in kcm-system only."""
    role = SERVICE_ACCOUNT_CREDENTIALS_ROLE
    rbac_group = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": f"{rbac_group}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [
                {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            ],
        },
        {
            "apiVersion": f"{rbac_group}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": NAMESPACE},
            "roleRef": {"apiGroup": rbac_group, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": rbac_group, "kind": "User", "name": user}],
        },
    ]


def strays(root: Path, wanted: dict[Path, str]) -> list[Path]:
    """Controller manifests no built-in controller's any more."""
    return [p for p in (root / "k8s/base/controllers").glob("*.yaml") if p not in wanted]


def stale(root: Path, specs: list[runtime.Spec]) -> list[Path]:
    """The files that differ from what `render` writes, and the strays."""
    wanted = render(root, specs)
    return [p for p, text in wanted.items() if not p.exists() or p.read_text() != text] + strays(root, wanted)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("manifests", help="write each built-in controller's k8s/ and compose entries")
    p.add_argument("--root", type=Path, default=Path("."), help="the repository (default: here)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    p.set_defaults(main=_main)


def _main(args: argparse.Namespace, words: list[str]) -> int:
    try:
        return _run(args)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"kcm manifests: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.check:
        out = stale(args.root, BUILTIN)
        for path in out:
            print(f"kcm manifests: {path} is out of date (run `make manifests`)", file=sys.stderr)
        return 1 if out else 0
    wanted = render(args.root, BUILTIN)
    for path in strays(args.root, wanted):
        path.unlink()
    for path, text in wanted.items():
        path.write_text(text)
    return 0
