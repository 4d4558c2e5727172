"""Endpoints validation with upstream's wording (pkg/apis/core/validation ValidateEndpoints,
validateEndpointAddress, ValidateNonSpecialIP, validateEndpointPort and their table cases)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver.defaults import apply_defaults
from kcm_apiserver.validation import validate

Obj = dict[str, Any]


def endpoints(*subsets: Obj) -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "mysvc", "namespace": "namespace"},
        "subsets": list(subsets),
    }
    apply_defaults("", "Endpoints", obj)
    return obj


def errors(obj: Obj) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in validate("", "Endpoints", obj, None)]


@pytest.mark.parametrize(
    "subset",
    [
        {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"name": "a", "port": 8675, "protocol": "TCP"}]},
        {
            "addresses": [{"ip": "10.10.1.1"}, {"ip": "10.10.2.2"}],
            "notReadyAddresses": [{"ip": "2001:db8::1", "hostname": "h-1", "nodeName": "node-1"}],
            "ports": [
                {"name": "a", "port": 8675, "protocol": "TCP"},
                {"name": "b", "port": 309, "protocol": "UDP", "appProtocol": "example.com/custom"},
            ],
        },
        {"addresses": [{"ip": "10.10.1.1"}]},  # a headless Service's subset has no ports
        {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"port": 80}]},  # one port needs no name
    ],
)
def test_valid_endpoints(subset: Obj) -> None:
    assert errors(endpoints(subset)) == []


def test_no_subsets_is_valid() -> None:
    assert errors(endpoints()) == []


@pytest.mark.parametrize(
    ("subset", "expected"),
    [
        (
            {"ports": [{"port": 80}]},
            [("subsets[0]", "Required value: must specify `addresses` or `notReadyAddresses`")],
        ),
        (
            {"addresses": [{"ip": "127.0.0.1"}]},
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
                )
            ],
        ),
        (
            {"notReadyAddresses": [{"ip": "::1"}]},
            [
                (
                    "subsets[0].notReadyAddresses[0].ip",
                    'Invalid value: "::1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
                )
            ],
        ),
        (
            {"addresses": [{"ip": "169.254.169.254"}]},
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "169.254.169.254": may not be in the link-local range '
                    "(169.254.0.0/16, fe80::/10)",
                )
            ],
        ),
        (
            {"addresses": [{"ip": "fe80::1"}]},
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)',
                )
            ],
        ),
        (
            {"addresses": [{"ip": "224.0.0.1"}]},
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "224.0.0.1": may not be in the link-local multicast range '
                    "(224.0.0.0/24, ff02::/10)",
                )
            ],
        ),
        (
            {"addresses": [{"ip": "0.0.0.0"}]},
            [("subsets[0].addresses[0].ip", 'Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)')],
        ),
        (
            {"addresses": [{"ip": "::ffff:127.0.0.1"}]},  # Go reads IPv4-mapped addresses as IPv4
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "::ffff:127.0.0.1": may not be in the loopback range '
                    "(127.0.0.0/8, ::1/128)",
                )
            ],
        ),
        (
            {"addresses": [{"ip": "[2001:db8::1]"}]},
            [
                (
                    "subsets[0].addresses[0].ip",
                    'Invalid value: "[2001:db8::1]": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
                ),
                ("subsets[0].addresses[0].ip", 'Invalid value: "[2001:db8::1]": must be a valid IP address'),
            ],
        ),
        (
            {"addresses": [{"ip": "10.10.1.1", "hostname": "Bad_Host"}]},
            [
                (
                    "subsets[0].addresses[0].hostname",
                    'Invalid value: "Bad_Host": a lowercase RFC 1123 label must consist of lower case '
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character "
                    "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ],
        ),
        (
            {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"port": 80}, {"name": "b", "port": 81}]},
            [("subsets[0].ports[0].name", "Required value")],
        ),
        (
            {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"name": "a", "port": 0}]},
            [("subsets[0].ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive")],
        ),
        (
            {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"name": "a", "port": 65536}]},
            [("subsets[0].ports[0].port", "Invalid value: 65536: must be between 1 and 65535, inclusive")],
        ),
        (
            {"addresses": [{"ip": "10.10.1.1"}], "ports": [{"name": "a", "port": 80, "protocol": "HTTP"}]},
            [
                (
                    "subsets[0].ports[0].protocol",
                    'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
                )
            ],
        ),
    ],
)
def test_invalid_endpoints(subset: Obj, expected: list[tuple[str, str]]) -> None:
    assert errors(endpoints(subset)) == expected


def test_update_is_validated_too() -> None:
    old = endpoints({"addresses": [{"ip": "10.10.1.1"}]})
    new = endpoints({"addresses": [{"ip": "127.0.0.1"}]})
    new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
    assert [c["field"] for c in validate("", "Endpoints", new, old)] == ["subsets[0].addresses[0].ip"]
