"""The CSR cleaner's decision with upstream's cases: each deadline (approved and issued, denied,
failed: 1 h after lastUpdateTime; pending: 24 h after creation; an issued certificate past its
NotAfter), conditions without a time never counting, and the sync deleting or requeueing."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_controllers.csrcleaner import controller as cleaner
from kcm_shared import runtime
from kcm_shared.controllerutil import csr
from kcm_shared.testing import caches, fakeclient

from tests import csrs

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
HOUR = dt.timedelta(hours=1)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def doc(
    conditions: list[dict[str, Any]], *, created: dt.datetime = NOW, certificate: bytes | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions}
    if certificate is not None:
        status["certificate"] = csrs.b64(certificate)
    return {
        "metadata": {"name": "c", "uid": "u1", "creationTimestamp": stamp(created)},
        "spec": {"signerName": "example.com/x"},
        "status": status,
    }


def cond(kind: str, updated: dt.datetime | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": "True"}
    if updated is not None:
        out["lastUpdateTime"] = stamp(updated)
    return out


def view(d: dict[str, Any]) -> csr.CSRView:
    return msgspec.convert(d, csr.CSRView)


CA = csrs.ca()
VALID = csrs.cert_pem(CA, "x", NOW + 10 * HOUR)
EXPIRED = csrs.cert_pem(CA, "x", NOW - dt.timedelta(minutes=1))


@pytest.mark.parametrize(
    ("d", "due", "why"),
    [
        (doc([]), NOW + 24 * HOUR, "more than 24h0m0s old and unhandled"),
        (doc([cond("Denied", NOW)]), NOW + HOUR, "more than 1h0m0s old and denied"),
        (doc([cond("Failed", NOW)]), NOW + HOUR, "more than 1h0m0s old and failed"),
        (doc([cond("Approved", NOW)], certificate=VALID), NOW + HOUR, "more than 1h0m0s old and approved"),
        (
            doc([cond("Approved", NOW)], certificate=EXPIRED),
            NOW - dt.timedelta(minutes=1),
            "the associated certificate is expired",
        ),
    ],
)
def test_deadlines_as_upstream(d: dict[str, Any], due: dt.datetime, why: str) -> None:
    assert cleaner.deadline(view(d)) == (due, why)


def test_approved_without_certificate_and_conditions_without_time_never_count() -> None:
    assert cleaner.deadline(view(doc([cond("Approved", NOW)]))) is None
    assert cleaner.deadline(view(doc([cond("Denied", None)]))) is None


def test_a_certificate_that_is_no_pem_fails_the_check() -> None:
    with pytest.raises(
        ValueError, match="expected the certificate associated with the CSR to be PEM encoded"
    ):
        cleaner.deadline(view(doc([cond("Approved", NOW)], certificate=b"junk")))


def run(d: dict[str, Any], now: dt.datetime) -> tuple[fakeclient.FakeClient, runtime.Result | None]:
    client = fakeclient.FakeClient()
    client.add("/apis/certificates.k8s.io/v1/certificatesigningrequests/c", d)
    store = caches.new(csr.CSRS, csr.CSRView, [d])
    c = cleaner.Cleaner(client, store, now=lambda: now)
    return client, asyncio.run(c.sync("c"))


def test_sync_requeues_before_the_deadline_and_deletes_after_it() -> None:
    d = doc([cond("Denied", NOW)])
    client, result = run(d, NOW + dt.timedelta(minutes=30))
    assert client.calls("delete") == []
    assert result == runtime.Result(requeue_after=30 * 60 + 1.0)
    client, result = run(d, NOW + HOUR + dt.timedelta(seconds=1))
    ((_, path, body),) = client.calls("delete")
    assert path.endswith("/certificatesigningrequests/c")
    assert body == {"preconditions": {"uid": "u1"}}
    assert result is None
