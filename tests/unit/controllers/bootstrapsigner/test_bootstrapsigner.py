"""The bootstrap signer's pure parts: upstream's JWS test vectors (jws_test.go), which token
Secrets sign (validateSecretForSigning's cases), and the ConfigMap data it writes."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest
from kcm_controllers.bootstrapsigner import controller as signer
from kcm_controllers.bootstrapsigner import jws
from kcm_shared.apis import bootstrapsecret

CONTENT = "Hello from the other side. I must have called a thousand times."
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("content", "secret", "want"),
    [
        (
            CONTENT,
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
        ),
        (
            "",
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
        ),
        (
            CONTENT,
            "my voice is my passcode. my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..SFoKn0-YxqnvpSExt4LuCZ_7pvIBdX3SoUO_NsTpkdg",
        ),
    ],
)
def test_detached_signatures_match_upstreams_vectors(content: str, secret: str, want: str) -> None:
    assert jws.detached_signature(content, "joshua", secret) == want


def secret_doc(name: str, **data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "type": bootstrapsecret.SECRET_TYPE,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


SIGN = {"usage-bootstrap-signing": "true"}


@pytest.mark.parametrize(
    ("doc", "signs"),
    [
        (
            secret_doc("bootstrap-token-abcdef", **{"token-id": "abcdef", "token-secret": "s" * 16}, **SIGN),
            True,
        ),
        (secret_doc("bootstrap-token-abcdef", **{"token-id": "abcdef", "token-secret": "s" * 16}), False),
        (
            secret_doc(
                "bootstrap-token-abcdef",
                **{"token-id": "abcdef", "token-secret": "s", "usage-bootstrap-signing": "false"},
            ),
            False,
        ),
        (secret_doc("bootstrap-token-abcdef", **{"token-id": "zzzzzz", "token-secret": "s"}, **SIGN), False),
        (secret_doc("bootstrap-token-abcdef", **{"token-id": "abcdef"}, **SIGN), False),
        (secret_doc("token-abcdef", **{"token-id": "abcdef", "token-secret": "s"}, **SIGN), False),
        (secret_doc("bootstrap-token-ABCDEF", **{"token-id": "ABCDEF", "token-secret": "s"}, **SIGN), False),
        (
            secret_doc(
                "bootstrap-token-abcdef",
                **{"token-id": "abcdef", "token-secret": "s", "expiration": "2025-12-31T00:00:00Z"},
                **SIGN,
            ),
            False,
        ),
        (
            secret_doc(
                "bootstrap-token-abcdef",
                **{"token-id": "abcdef", "token-secret": "s", "expiration": "soon"},
                **SIGN,
            ),
            False,
        ),
    ],
)
def test_which_tokens_sign_as_upstream(doc: dict[str, Any], signs: bool) -> None:
    tokens, _ = signer.signing_tokens([doc], NOW)
    assert bool(tokens) is signs


def test_the_first_expiry_is_reported() -> None:
    docs = [
        secret_doc(
            f"bootstrap-token-{i}aaaaa",
            **{"token-id": f"{i}aaaaa", "token-secret": "s", "expiration": f"2026-01-0{i + 2}T00:00:00Z"},
            **SIGN,
        )
        for i in (1, 2)
    ]
    tokens, first = signer.signing_tokens(docs, NOW)
    assert set(tokens) == {"1aaaaa", "2aaaaa"}
    assert first == dt.timedelta(days=2)


def test_signed_data_adds_replaces_and_drops_signatures_and_keeps_the_rest() -> None:
    data = {"kubeconfig": "k", "other": "x", "jws-kubeconfig-gone00": "old", "jws-kubeconfig-abcdef": "stale"}
    out = signer.signed_data(data, {"abcdef": "secret"})
    assert out == {
        "kubeconfig": "k",
        "other": "x",
        "jws-kubeconfig-abcdef": jws.detached_signature("k", "abcdef", "secret"),
    }
    assert out is not None
    assert signer.signed_data(out, {"abcdef": "secret"}) is None
