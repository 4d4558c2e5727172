"""`kcm apiserver --authorization-mode=RBAC`: kubectl's auth commands and the official Python
client's review APIs against the embedded server, as they work against kube-apiserver.

One server for the module (RBAC enforcing, service account keys for TokenRequest and
TokenReview); each test works in a namespace of its own. The admin of the written kubeconfig
is in system:masters, as kubeadm's admin.conf is; other users are reached by impersonation
(`--as`) or by a service account's token.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kcm_cli import pki
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.conftest import KUBECTL, ApiServer, start_apiserver

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    keys = pki.ensure(tmp_path_factory.mktemp("pki"))
    running = start_apiserver(
        tmp_path_factory.mktemp("apiserver"),
        "--authorization-mode=RBAC",
        f"--service-account-key-file={keys.sa_pub}",
        f"--service-account-signing-key-file={keys.sa_key}",
    )
    yield running
    running.stop()


@pytest.fixture()
def ns(server: ApiServer) -> str:
    name = f"auth-{next(_namespaces)}"
    kubectl(server, "create", "namespace", name)
    return name


def kubectl(
    server: ApiServer, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(server.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: pod-reader, namespace: {ns}}}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: reads, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
- {{kind: ServiceAccount, name: robot}}
"""


def test_kubectl_auth_whoami_can_i_and_reconcile(server: ApiServer, ns: str, tmp_path: Path) -> None:
    whoami = kubectl(server, "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").stdout
    assert "system:masters" in whoami
    assert kubectl(server, "auth", "can-i", "delete", "nodes").stdout.strip() == "yes"
    user = f"{ns}-bob"
    assert (
        kubectl(server, "auth", "can-i", "list", "pods", "-n", ns, "--as", user, check=False).stdout.strip()
        == "no"
    )
    manifest = tmp_path / "role.yaml"
    manifest.write_text(ROLE.format(ns=ns, user=user))
    first = kubectl(server, "auth", "reconcile", "-f", str(manifest)).stdout
    assert "role.rbac.authorization.k8s.io/pod-reader reconciled" in first
    kubectl(server, "auth", "reconcile", "-f", str(manifest))  # again: nothing to change, no error
    assert kubectl(server, "auth", "can-i", "list", "pods", "-n", ns, "--as", user).stdout.strip() == "yes"
    assert (
        kubectl(server, "auth", "can-i", "get", "secrets", "-n", ns, "--as", user, check=False).stdout.strip()
        == "no"
    )
    listed = kubectl(server, "auth", "can-i", "--list", "-n", ns, "--as", user).stdout
    assert any(line.split()[:1] == ["pods"] and "[get list]" in line for line in listed.splitlines()), listed
    assert "selfsubjectaccessreviews.authorization.k8s.io" in listed
    refused = kubectl(server, "get", "pods", "-n", "default", "--as", user, check=False)
    assert refused.returncode != 0
    assert (
        f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" in the namespace "default"'
        in refused.stderr
    )
    # A user may not grant what it does not hold.
    kubectl(
        server,
        "create",
        "role",
        "rbac-writer",
        "--verb=create",
        "--resource=roles.rbac.authorization.k8s.io",
        "-n",
        ns,
    )
    kubectl(server, "create", "rolebinding", "writes", "--role=rbac-writer", f"--user={user}", "-n", ns)
    wider = kubectl(
        server,
        "create",
        "role",
        "wider",
        "--verb=delete",
        "--resource=pods",
        "-n",
        ns,
        "--as",
        user,
        check=False,
    )
    assert "is attempting to grant RBAC permissions not currently held" in wider.stderr, wider.stderr
    kubectl(server, "create", "role", "narrower", "--verb=get", "--resource=pods", "-n", ns, "--as", user)


def test_the_python_client_reviews_tokens_and_access(server: ApiServer, ns: str, tmp_path: Path) -> None:
    admin = config.new_client_from_config(config_file=str(server.kubeconfig))
    core = client.CoreV1Api(admin)
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="robot"))
    )
    token = core.create_namespaced_service_account_token(
        "robot", ns, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    ).status.token
    authn = client.AuthenticationV1Api(admin)
    review = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
    assert review.status.authenticated
    robot = f"system:serviceaccount:{ns}:robot"
    assert review.status.user.username == robot
    assert review.status.user.groups == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{ns}",
        "system:authenticated",
    ]
    elsewhere = authn.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=["somebody-else"]))
    )
    assert not elsewhere.status.authenticated and elsewhere.status.error

    # The robot's own token is refused until a binding names it.
    robot_client = client.ApiClient(client.Configuration())
    robot_client.configuration.host = admin.configuration.host
    robot_client.configuration.api_key = {"authorization": f"Bearer {token}"}
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(robot_client).list_namespaced_pod(ns)
    assert refused.value.status == 403
    sar = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=robot,
            groups=["system:serviceaccounts"],
            resource_attributes=client.V1ResourceAttributes(namespace=ns, verb="list", resource="pods"),
        )
    )
    authz = client.AuthorizationV1Api(admin)
    assert not authz.create_subject_access_review(sar).status.allowed
    manifest = tmp_path / "role.yaml"
    manifest.write_text(ROLE.format(ns=ns, user="nobody"))
    kubectl(server, "apply", "-f", str(manifest))
    answer = authz.create_subject_access_review(sar).status
    assert answer.allowed
    assert (
        answer.reason
        == f'RBAC: allowed by RoleBinding "reads/{ns}" of Role "pod-reader" to ServiceAccount "robot/{ns}"'
    )
    assert client.CoreV1Api(robot_client).list_namespaced_pod(ns).items == []
    rules = client.AuthorizationV1Api(robot_client).create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=ns))
    )
    assert any(r.resources == ["pods"] and r.verbs == ["get", "list"] for r in rules.status.resource_rules)
