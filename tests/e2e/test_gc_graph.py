"""The garbage collector's debug handler on the secure port, as kube-controller-manager serves it:
`/debug/controllers/garbage-collector-controller/graph` (upstream mounts a Debuggable controller's
handler under its canonical name) answers the dependency graph in DOT.

- An owner and a dependent made with kubectl show up as two vertices and the edge dependent ->
  owner, in the whole graph and with `?uid=<owner>`, for a ServiceAccount token whose
  ClusterRole allows `get` on the nonResourceURL `/debug/controllers/*`.
- A token without that permission is forbidden (403, upstream's Status naming the user); no
  token is anonymous and forbidden too, a made-up token unauthorized (401): the path is not one
  of `--authorization-always-allow-paths`.
The embedded server runs with `--authorization-mode=RBAC`; on an API server that does not serve
TokenReview and SubjectAccessReview the tests skip, naming the missing API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for
from tests.e2e import devstack, secureport
from tests.e2e.secureport import Secure, serves_reviews

PATH = "/debug/controllers/garbage-collector-controller/graph"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devstack.DevStack]:
    with secureport.dev_stack(tmp_path_factory.mktemp("devstack"), "garbagecollector") as served:
        yield served


@pytest.fixture(scope="module")
def secure(stack: devstack.DevStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    with secureport.serve(stack, tmp_path_factory.mktemp("secure")) as served:
        yield served


@pytest.fixture(scope="module")
def tokens(stack: devstack.DevStack) -> tuple[str, str]:
    """(a token allowed /debug/controllers/*, one that is not)."""
    serves_reviews(stack)
    return secureport.tokens(stack, "gc-debug", "kcm-gc-debug", "/debug/controllers/*")


def _uid(stack: devstack.DevStack, namespace: str, kind: str, name: str) -> str:
    return stack.kubectl("get", kind, name, "-n", namespace, "-o", "jsonpath={.metadata.uid}").stdout.strip()


def test_graph_shows_an_owner_and_its_dependent(
    stack: devstack.DevStack, secure: Secure, tokens: tuple[str, str]
) -> None:
    allowed, _ = tokens
    ns = "gc-graph"
    k = stack.kubectl
    k("create", "namespace", ns)
    k("create", "configmap", "owner", "-n", ns)
    owner = _uid(stack, ns, "configmap", "owner")
    dependent_ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner,
    }
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dependent", "namespace": ns, "ownerReferences": [dependent_ref]},
    }
    k("apply", "-f", "-", input=json.dumps(dependent))
    child = _uid(stack, ns, "configmap", "dependent")
    edge = f'"{child}" -> "{owner}";'

    def drawn() -> bool:
        code, body = secure.get(PATH, token=allowed)
        assert code == 200, body
        return edge in body

    wait_for(drawn, 60, interval=0.5, what="the owner and its dependent in the graph")
    code, body = secure.get(f"{PATH}?uid={owner}", token=allowed)
    assert code == 200, body
    assert body.startswith("strict digraph full {\n")
    assert f'  "{owner}" [\n' in body and f'  "{child}" [\n' in body and edge in body
    assert f'label="uid={child}\\nnamespace={ns}\\nConfigMap.v1/dependent\\n"' in body
    assert 'virtual="false"' in body


def test_graph_needs_get_on_the_debug_path(secure: Secure, tokens: tuple[str, str]) -> None:
    _, denied = tokens
    code, body = secure.get(PATH, token=denied)
    assert code == 403, body
    message = json.loads(body)["message"]
    assert message.startswith(
        f'forbidden: User "system:serviceaccount:gc-debug:nobody" cannot get path "{PATH}"'
    )
    code, body = secure.get(PATH)
    assert code == 403, body
    assert 'User "system:anonymous"' in json.loads(body)["message"]
    code, body = secure.get(PATH, token="not-a-token")
    assert code == 401, body
    assert json.loads(body)["reason"] == "Unauthorized"
