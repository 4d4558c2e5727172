"""The embedded API server's CSR strategies and validation, with upstream's cases: the
requester from the authenticated user, what each subresource may change, condition timestamps,
and the validation messages (test_apiserver_parity compares the same against kube-apiserver)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest
from kcm_apiserver import certificates
from kcm_apiserver.validation import certificates as validation
from kcm_apiserver.validation.fielderrors import Causes

from tests import csrs

NOW = "2026-01-01T00:00:00Z"
REQUEST = base64.b64encode(csrs.request_pem("u")).decode()


def csr(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c"},
        "spec": {"request": REQUEST, "signerName": "example.com/s", "usages": ["client auth"]},
        "status": status,
    }


def messages(obj: dict[str, Any], old: dict[str, Any] | None = None, sub: str = "") -> list[str]:
    c = Causes()
    validation.validate_csr(c, obj, old, sub)
    return [f"{x['field']}: {x['message']}" for x in c]


def test_create_records_the_authenticated_user_not_the_clients_claim() -> None:
    obj = csr(conditions=[{"type": "Approved", "status": "True"}])
    obj["spec"] |= {"username": "mallory", "groups": ["system:nodes"], "extra": {"a": ["b"]}}
    certificates.prepare_create(obj, {"username": "alice", "uid": "1", "groups": ["devs"]})
    assert obj["status"] == {}
    assert {k: obj["spec"].get(k) for k in ("username", "uid", "groups", "extra")} == {
        "username": "alice",
        "uid": "1",
        "groups": ["devs"],
        "extra": None,
    }


APPROVED = {"type": "Approved", "status": "True", "reason": "r"}


def test_approval_changes_only_conditions_and_stamps_them() -> None:
    old = csr(certificate="")
    new = csr(conditions=[dict(APPROVED)], certificate="changed")
    new["spec"]["usages"] = ["server auth"]
    certificates.prepare_update(old, new, "approval", lambda: NOW)
    assert new["spec"] == old["spec"]
    assert new["status"] == {
        "certificate": "",
        "conditions": [{**APPROVED, "lastUpdateTime": NOW, "lastTransitionTime": NOW}],
    }


def test_transition_time_is_kept_for_the_same_type_and_status() -> None:
    old = csr(conditions=[{**APPROVED, "lastTransitionTime": "2020-01-01T00:00:00Z"}])
    new = csr(conditions=[dict(APPROVED)])
    certificates.prepare_update(old, new, "approval", lambda: NOW)
    assert new["status"]["conditions"][0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"


def test_status_keeps_approval_conditions_and_main_resource_keeps_everything() -> None:
    old = csr(conditions=[{**APPROVED, "message": "old"}])
    new = csr(conditions=[{**APPROVED, "message": "new"}], certificate="x")
    certificates.prepare_update(old, new, "status", lambda: NOW)
    assert new["status"]["conditions"][0]["message"] == "old"
    main = csr(conditions=[])
    main["spec"]["usages"] = ["server auth"]
    certificates.prepare_update(old, main, "", lambda: NOW)
    assert main["spec"] == old["spec"] and main["status"] == old["status"]


LEGACY = (
    'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": '
    "the legacy signerName is not allowed via this API version"
)
UNQUALIFIED = (
    'spec.signerName: Invalid value: "nodomain": '
    "must be a fully qualified domain and path of the form 'example.com/signer-name'"
)


@pytest.mark.parametrize(
    ("change", "want"),
    [
        (
            {"expirationSeconds": 599},
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
        ),
        ({"usages": []}, "spec.usages: Required value"),
        ({"usages": ["client auth", "client auth"]}, 'spec.usages[1]: Duplicate value: "client auth"'),
        (
            {"signerName": "kubernetes.io/legacy-unknown"},
            LEGACY,
        ),
        (
            {"signerName": "nodomain"},
            UNQUALIFIED,
        ),
        (
            {"request": base64.b64encode(b"no").decode()},
            "spec.request: Invalid value: []byte{0x6e, 0x6f}: PEM block type must be CERTIFICATE REQUEST",
        ),
    ],
)
def test_create_validation_messages(change: dict[str, Any], want: str) -> None:
    obj = csr()
    obj["spec"] |= change
    assert messages(obj) == [want]


def test_update_rules() -> None:
    approved = csr(conditions=[APPROVED])
    assert messages(csr(), approved, "approval") == [
        'status.conditions: Forbidden: updates may not remove a condition of type "Approved"'
    ]
    assert messages(approved, csr(), "status") == [
        'status.conditions: Forbidden: updates may not add a condition of type "Approved"'
    ]
    both = csr(conditions=[APPROVED, {"type": "Denied", "status": "True"}])
    assert messages(both, csr(), "approval") == [
        'status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive'
    ]
    cert = base64.b64encode(csrs.cert_pem(csrs.ca(), "x", dt.datetime(2030, 1, 1, tzinfo=dt.UTC))).decode()
    issued = csr(conditions=[APPROVED], certificate=cert)
    assert messages(issued, approved, "") == [
        "status.certificate: Forbidden: updates may not set certificate content"
    ]
    assert messages(issued, approved, "status") == []
    other = csr(conditions=[APPROVED], certificate=base64.b64encode(b"junk").decode())
    assert messages(other, issued, "status") == [
        'status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block',
        "status.certificate: Forbidden: updates may not modify existing certificate content",
    ]
