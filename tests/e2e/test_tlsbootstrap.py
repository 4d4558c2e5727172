"""A simulated kubelet's TLS bootstrap end to end: `kcm dev` with csrsigning, csrapproving and
bootstrapsigner, on the embedded API server and on kube-apiserver.

Set up through kubectl as `kubeadm init` does: a bootstrap token Secret (authentication and
signing, auth-extra-groups kubeadm's node group), the cluster-info ConfigMap in kube-public
naming the secure server and the cluster CA, anonymous read of it, and the bindings of
`system:node-bootstrapper` and `certificatesigningrequests:nodeclient` to the token's group.
Then `python -m tools.tlsbootstrap` joins as kubeadm join and the kubelet do: it verifies the
bootstrapsigner's JWS signature of cluster-info with the token and pins the CA by its hash,
files a kubelet client CSR with the token, and waits for the certificate (auto-approved after a
SubjectAccessReview, signed by the cluster CA). `kubectl auth whoami` with the kubeconfig it
writes answers `system:node:<name>` in system:nodes. A token whose secret does not match
authenticates nobody. One stack, names unique per test.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from tests.conftest import wait_for
from tests.e2e import devstack
from tools import tlsbootstrap

stack = devstack.stack_fixture("--controllers", "csrsigning,csrapproving,bootstrapsigner", "--nodes", "0")

NODE_GROUP = "system:bootstrappers:kubeadm:default-node-token"  # kubeadm's default token group


def secure_server(s: devstack.DevStack) -> str:
    config = yaml.safe_load((s.state / "kubeconfig-tls").read_text())
    server: str = config["clusters"][0]["cluster"]["server"]
    return server


def apply(s: devstack.DevStack, *docs: dict[str, Any]) -> None:
    # JSON, not YAML: a random hex id such as 1e4567 is a string to PyYAML but a number to kubectl.
    s.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}))


def kubeadm_init(s: devstack.DevStack, token_id: str, token_secret: str) -> None:
    """What `kubeadm init`'s bootstrap-token phase writes, for one token."""
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ca = (s.state / "pki" / "ca.crt").read_bytes()
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "server": secure_server(s),
                    "certificate-authority-data": base64.b64encode(ca).decode(),
                },
            }
        ],
    }
    bind = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NODE_GROUP}
    apply(
        s,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "stringData": {
                "token-id": token_id,
                "token-secret": token_secret,
                "expiration": expires,
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
                "auth-extra-groups": NODE_GROUP,
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": yaml.safe_dump(kubeconfig)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["cluster-info"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "kubeadm:bootstrap-signer-clusterinfo",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:kubelet-bootstrap"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node-bootstrapper",
            },
            "subjects": [bind],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:node-autoapprove-bootstrap"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            },
            "subjects": [bind],
        },
    )


def join(s: devstack.DevStack, token: str, node: str, out: Path) -> subprocess.CompletedProcess[str]:
    ca = x509.load_pem_x509_certificate((s.state / "pki" / "ca.crt").read_bytes())
    argv = [
        sys.executable,
        "-m",
        "tools.tlsbootstrap",
        "--server",
        secure_server(s),
        "--token",
        token,
        "--node-name",
        node,
        "--out",
        str(out),
        "--discovery-token-ca-cert-hash",
        tlsbootstrap.ca_cert_hash(ca),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def signed(s: devstack.DevStack, token_id: str) -> bool:
    res = s.kubectl("-n", "kube-public", "get", "configmap", "cluster-info", "-o", "json", check=False)
    return res.returncode == 0 and f"jws-kubeconfig-{token_id}" in (json.loads(res.stdout).get("data") or {})


def test_a_simulated_kubelet_joins_and_authenticates_as_its_node(
    stack: devstack.DevStack, tmp_path: Path
) -> None:
    token_id, token_secret = secrets.token_hex(3), secrets.token_hex(8)
    kubeadm_init(stack, token_id, token_secret)
    wait_for(lambda: signed(stack, token_id), 30, interval=0.25, what="cluster-info signed")
    node = f"worker-{secrets.token_hex(3)}"
    res = join(stack, f"{token_id}.{token_secret}", node, tmp_path / "kubelet")
    assert res.returncode == 0, res.stderr
    kubeconfig = Path(res.stdout.strip())

    csrs = json.loads(stack.kubectl("get", "csr", "-o", "json").stdout)["items"]
    mine = [c for c in csrs if c["spec"]["username"] == f"system:bootstrap:{token_id}"]
    assert len(mine) == 1
    csr = mine[0]
    assert NODE_GROUP in csr["spec"]["groups"]
    assert "system:bootstrappers" in csr["spec"]["groups"]
    approved = next(c for c in csr["status"]["conditions"] if c["type"] == "Approved")
    assert approved["reason"] == "AutoApproved"

    who = subprocess.run(
        [devstack.KUBECTL, "--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert who.returncode == 0, who.stderr
    user = json.loads(who.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:node:{node}"
    assert "system:nodes" in user["groups"]
    assert "system:authenticated" in user["groups"]


def test_a_token_with_the_wrong_secret_authenticates_nobody(stack: devstack.DevStack) -> None:
    token_id, token_secret = secrets.token_hex(3), secrets.token_hex(8)
    kubeadm_init(stack, token_id, token_secret)
    config = yaml.safe_load((stack.state / "kubeconfig-tls").read_text())
    cluster = config["clusters"][0]["cluster"]
    base = ["--kubeconfig", "/dev/null", "--server", cluster["server"]]
    base += ["--certificate-authority", str(stack.state / "pki" / "ca.crt")]

    def whoami(token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [devstack.KUBECTL, *base, "--token", token, "auth", "whoami", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = whoami(f"{token_id}.{token_secret}")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["status"]["userInfo"]["username"] == f"system:bootstrap:{token_id}"
    wrong = whoami(f"{token_id}.{secrets.token_hex(8)}")
    assert wrong.returncode != 0
    assert "Unauthorized" in wrong.stderr or "provide credentials" in wrong.stderr
