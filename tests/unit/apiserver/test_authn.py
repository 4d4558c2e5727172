"""The embedded API server's authenticator: who a request is, and every way a token is refused
(upstream pkg/serviceaccount jwt_test.go TestTokenGenerateAndValidate cases, on the stored
objects)."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from kcm_apiserver import authn, errors
from kcm_apiserver import main as apiserver_main
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store
from kcm_cli import pki
from kcm_shared.apis import satoken

NS = "ns"


class World:
    """An Api with a ServiceAccount `sa` and its legacy token Secret `sa-token`."""

    def __init__(self, keys: Path, static_token: str | None = None) -> None:
        files = pki.ensure(keys)  # made once per module: RSA keys take a while
        config = apiserver_main.service_account_tokens(
            apiserver_main.Options(
                service_account_key_files=[files.sa_pub], service_account_signing_key_file=files.sa_key
            )
        )
        assert config is not None and config.signer is not None
        self.config = config
        self.signer = config.signer
        self.legacy_signer = satoken.Signer(satoken.load_private_key(files.sa_key), satoken.LEGACY_ISSUER)
        self.api = Api(Store(None), Registry())
        self.create("namespaces", {"metadata": {"name": NS}}, namespace="")
        self.sa = self.create(
            "serviceaccounts", {"metadata": {"name": "sa"}, "secrets": [{"name": "sa-token"}]}
        )
        self.legacy = self.legacy_signer.sign(satoken.legacy_claims(NS, "sa", self.uid, "sa-token"))
        self.create(
            "secrets",
            {
                "metadata": {"name": "sa-token", "annotations": {"kubernetes.io/service-account.name": "sa"}},
                "type": "kubernetes.io/service-account-token",
                "data": {"token": base64.b64encode(self.legacy.encode()).decode()},
            },
        )
        self.authn = authn.Authenticator(self.api, static_token, config)

    @property
    def uid(self) -> str:
        return str(self.sa["metadata"]["uid"])

    def ctx(self, resource: str, namespace: str = NS) -> Ctx:
        rt = self.api.registry.lookup("", "v1", resource)
        assert rt is not None
        return Ctx(rt, namespace)

    def create(self, resource: str, obj: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
        kind = {"namespaces": "Namespace", "serviceaccounts": "ServiceAccount", "secrets": "Secret"}[resource]
        return self.api.create(self.ctx(resource, namespace), {"apiVersion": "v1", "kind": kind, **obj})

    def bound(self, **changes: Any) -> str:
        claims = satoken.bound_claims(
            NS,
            "sa",
            self.uid,
            audiences=self.config.audiences,
            expiration_seconds=3600,
            now=dt.datetime.now(dt.UTC),
        )
        claims.update(changes)
        return self.signer.sign(claims)

    def who(self, header: str) -> tuple[str, list[str]]:
        warnings: list[str] = []
        return self.authn.authenticate(header, warnings).username, warnings

    def refused(self, header: str) -> bool:
        try:
            self.authn.authenticate(header, [])
        except errors.ApiError as exc:
            return exc.code == 401
        return False

    def secret(self) -> dict[str, Any]:
        return self.api.get(self.ctx("secrets"), "sa-token")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pki")
    pki.ensure(path)
    return path


@pytest.fixture
def world(keys: Path) -> World:
    return World(keys)


def test_no_credentials_is_the_local_admin_unless_a_static_token_is_set(keys: Path) -> None:
    assert World(keys).who("") == ("kubernetes-admin", [])
    closed = World(keys, static_token="s3cret")
    assert closed.refused("")
    assert closed.refused("Basic dXNlcjpwYXNz")
    assert closed.who("Bearer s3cret")[0] == "kubernetes-admin"
    assert closed.refused("Bearer s3cre")


def test_bound_token(world: World) -> None:
    assert world.who(f"Bearer {world.bound()}") == ("system:serviceaccount:ns:sa", [])
    user = world.authn.authenticate(f"Bearer {world.bound()}", [])
    assert user.uid == world.uid
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")


@pytest.mark.parametrize(
    "changes",
    [
        {"aud": ["someone-else"]},
        {"iss": "https://elsewhere"},
        {"exp": 1},
        {"kubernetes.io": {"namespace": NS, "serviceaccount": {"name": "sa", "uid": "another-uid"}}},
        {"kubernetes.io": {"namespace": NS, "serviceaccount": {"name": "missing", "uid": "u"}}},
    ],
    ids=["audience", "issuer", "expired", "sa uid", "sa missing"],
)
def test_bound_token_refused(world: World, changes: dict[str, Any]) -> None:
    assert world.refused(f"Bearer {world.bound(**changes)}")


def test_bound_token_dies_with_its_service_account(world: World) -> None:
    token = world.bound()
    assert not world.refused(f"Bearer {token}")  # verified once, then remembered
    world.api.delete(world.ctx("serviceaccounts"), "sa", {})
    assert world.refused(f"Bearer {token}")


def test_legacy_token_is_stamped_and_warned_about(world: World) -> None:
    assert world.who(f"Bearer {world.legacy}") == (
        "system:serviceaccount:ns:sa",
        [authn.AUTO_GENERATED_WARNING],
    )
    labels = world.secret()["metadata"]["labels"]
    assert labels == {authn.LAST_USED_LABEL: dt.datetime.now(dt.UTC).date().isoformat()}
    rv = world.secret()["metadata"]["resourceVersion"]
    world.who(f"Bearer {world.legacy}")
    assert world.secret()["metadata"]["resourceVersion"] == rv  # at most one write a day


def test_legacy_token_stale_label_is_renewed(world: World) -> None:
    world.api.patch(
        world.ctx("secrets"),
        "sa-token",
        "merge",
        {"metadata": {"labels": {authn.LAST_USED_LABEL: "2020-01-01"}}},
    )
    world.who(f"Bearer {world.legacy}")
    assert world.secret()["metadata"]["labels"][authn.LAST_USED_LABEL] != "2020-01-01"


def test_legacy_token_marked_invalid_is_refused_but_its_use_recorded(world: World) -> None:
    world.api.patch(
        world.ctx("secrets"),
        "sa-token",
        "merge",
        {
            "metadata": {
                "labels": {authn.INVALID_SINCE_LABEL: "2020-01-01", authn.LAST_USED_LABEL: "2020-01-01"}
            }
        },
    )
    assert world.refused(f"Bearer {world.legacy}")
    assert world.secret()["metadata"]["labels"][authn.LAST_USED_LABEL] != "2020-01-01"


@pytest.mark.parametrize("change", ["token replaced", "secret deleted", "sa deleted", "sa replaced"])
def test_legacy_token_refused(world: World, change: str) -> None:
    if change == "token replaced":
        world.api.patch(
            world.ctx("secrets"), "sa-token", "merge", {"data": {"token": base64.b64encode(b"x").decode()}}
        )
    elif change == "secret deleted":
        world.api.delete(world.ctx("secrets"), "sa-token", {})
    elif change == "sa deleted":
        world.api.delete(world.ctx("serviceaccounts"), "sa", {})
    else:
        world.api.delete(world.ctx("serviceaccounts"), "sa", {})
        world.create("serviceaccounts", {"metadata": {"name": "sa"}})
    assert world.refused(f"Bearer {world.legacy}")


def test_tracking_configmap(world: World) -> None:
    day = dt.date(2026, 11, 24)
    authn.ensure_tracking(world.api, day)
    cm_ctx = world.ctx("configmaps", "kube-system")
    assert world.api.get(cm_ctx, authn.TRACKING_CONFIGMAP)["data"] == {"since": "2026-11-24"}
    authn.ensure_tracking(world.api, day + dt.timedelta(days=3))  # a valid date is kept
    assert world.api.get(cm_ctx, authn.TRACKING_CONFIGMAP)["data"] == {"since": "2026-11-24"}
    world.api.patch(cm_ctx, authn.TRACKING_CONFIGMAP, "merge", {"data": {"since": "soon"}})
    authn.ensure_tracking(world.api, day + dt.timedelta(days=3))  # a broken one is repaired
    assert world.api.get(cm_ctx, authn.TRACKING_CONFIGMAP)["data"] == {"since": "2026-11-27"}


def test_token_review_checks_the_audiences_asked_for(keys: Path) -> None:
    """TokenReview (pkg/registry/authentication/tokenreview): spec.audiences, else
    --api-audiences; the static token is audience-agnostic; an open server's admin is no
    answer for a token nobody verified."""
    world = World(keys, static_token="s3cret")
    server_audience = world.config.audiences[0]
    verdict = world.authn.review(world.bound(aud=["api", "other"]), ["other", "third"])
    assert verdict.user is not None and verdict.user.username == "system:serviceaccount:ns:sa"
    assert verdict.audiences == ("other",)
    assert world.authn.review(world.bound(), []).audiences == (server_audience,)
    refused = world.authn.review(world.bound(), ["somebody-else"])
    assert refused.user is None and refused.error.startswith("[invalid bearer token, ")
    legacy = world.authn.review(world.legacy, ["somebody-else"])
    assert legacy.error == (
        f'[invalid bearer token, token audiences ["{server_audience}"] is invalid for the target '
        'audiences ["somebody-else"]]'
    )
    assert world.authn.review(world.legacy, []).user is not None
    static = world.authn.review("s3cret", [])
    assert static.user == authn.ADMIN and static.audiences == (server_audience,)
    assert world.authn.review("s3cret", ["somebody-else"]).user is None
    assert world.authn.review("garbage", []).error == "invalid bearer token"
    assert world.authn.review(world.bound(iss="https://elsewhere"), []).error == "invalid bearer token"
    open_server = authn.Authenticator(world.api, None, None)
    assert open_server.review("anything", []) == authn.TokenVerdict(None, error="invalid bearer token")
