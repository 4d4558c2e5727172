"""The token cleaner's sync: an expired (or unparseable) expiration deletes the Secret with its
uid as precondition, a future one runs again then, none keeps it; other Secrets are not read."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from typing import Any

import pytest
from kcm_controllers.tokencleaner import controller as tokencleaner
from kcm_shared import runtime
from kcm_shared.apis import bootstrapsecret
from kcm_shared.controllerutil import bootstraptoken
from kcm_shared.testing import caches, fakeclient

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PATH = "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef"


def doc(expiration: str | None, kind: str = bootstrapsecret.SECRET_TYPE) -> dict[str, Any]:
    data = {"token-id": "abcdef"} | ({"expiration": expiration} if expiration is not None else {})
    return {
        "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system", "uid": "u1"},
        "type": kind,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def run(d: dict[str, Any]) -> tuple[fakeclient.FakeClient, runtime.Result | None]:
    client = fakeclient.FakeClient()
    client.add(PATH, d)
    store = caches.new(bootstraptoken.SECRETS, bootstraptoken.SecretView, [d])
    cleaner = tokencleaner.Cleaner(client, store, now=lambda: NOW)
    return client, asyncio.run(cleaner.sync("kube-system/bootstrap-token-abcdef"))


@pytest.mark.parametrize(
    "expiration", ["2025-12-31T23:59:59Z", "2026-01-01T00:00:00Z", "not a time", "2026-01-02"]
)
def test_expired_or_unparseable_is_deleted(expiration: str) -> None:
    client, result = run(doc(expiration))
    assert client.calls("delete") == [("delete", PATH, {"preconditions": {"uid": "u1"}})]
    assert result is None


def test_a_future_expiry_runs_again_then_and_none_never() -> None:
    client, result = run(doc("2026-01-01T01:00:00+01:00"))  # midnight UTC: expired now
    assert len(client.calls("delete")) == 1
    client, result = run(doc("2026-01-01T00:00:30Z"))
    assert client.calls("delete") == []
    assert result == runtime.Result(requeue_after=30.0)
    client, result = run(doc(None))
    assert (client.calls("delete"), result) == ([], None)


def test_other_secrets_are_not_read() -> None:
    client, result = run(doc("2020-01-01T00:00:00Z", kind="Opaque"))
    assert client.calls() == []
    assert result is None
