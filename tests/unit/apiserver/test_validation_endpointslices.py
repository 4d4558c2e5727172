"""EndpointSlice validation with upstream's wording (pkg/apis/discovery/validation
validation_test.go's cases: address types, addresses per type, limits, ports, hints, immutability)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_apiserver.defaults import apply_defaults
from kcm_apiserver.validation import validate

Obj = dict[str, Any]


def eps(
    address_type: str = "IPv4", endpoints: list[Obj] | None = None, ports: list[Obj] | None = None
) -> Obj:
    obj: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "hello", "namespace": "world"},
        "addressType": address_type,
        "endpoints": endpoints if endpoints is not None else [{"addresses": ["10.1.2.3"]}],
        "ports": ports if ports is not None else [{"name": "http", "protocol": "TCP", "port": 80}],
    }
    apply_defaults("discovery.k8s.io", "EndpointSlice", obj)
    return obj


def errors(obj: Obj, old: Obj | None = None) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in validate("discovery.k8s.io", "EndpointSlice", obj, old)]


@pytest.mark.parametrize(
    "obj",
    [
        eps(),
        eps("IPv6", [{"addresses": ["2001:db8::1"], "hostname": "h-1", "nodeName": "node-1"}]),
        eps("FQDN", [{"addresses": ["foo.example.com", "bar.example.com."]}]),
        eps(endpoints=[], ports=[]),  # a placeholder
        eps(ports=[{"port": 80}, {"name": "b", "port": 81, "appProtocol": "example.com/custom"}]),
        eps(endpoints=[{"addresses": ["10.1.2.3"], "hints": {"forZones": [{"name": "zone-a"}]}}]),
        eps(endpoints=[{"addresses": ["10.1.2.3"]}] * 1000),
    ],
)
def test_valid(obj: Obj) -> None:
    assert errors(obj) == []


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (eps(""), [("addressType", "Required value")]),
        (eps("IP"), [("addressType", 'Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"')]),
        (
            eps(endpoints=[{"addresses": []}]),
            [("endpoints[0].addresses", "Required value: must contain at least 1 address")],
        ),
        (
            eps(endpoints=[{"addresses": [f"10.0.0.{i}" for i in range(1, 102)]}]),
            [("endpoints[0].addresses", "Too many: 101: must have at most 100 items")],
        ),
        (
            eps(endpoints=[{"addresses": ["2001:db8::1"]}]),
            [("endpoints[0].addresses[0]", 'Invalid value: "2001:db8::1": must be a valid IPv4 address')],
        ),
        (
            eps("IPv6", [{"addresses": ["10.1.2.3"]}]),
            [("endpoints[0].addresses[0]", 'Invalid value: "10.1.2.3": must be a valid IPv6 address')],
        ),
        (
            eps(endpoints=[{"addresses": ["127.0.0.1"]}]),
            [
                (
                    "endpoints[0].addresses[0]",
                    'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
                )
            ],
        ),
        (
            eps("FQDN", [{"addresses": ["localhost"]}]),
            [
                (
                    "endpoints[0].addresses[0]",
                    'Invalid value: "localhost": should be a domain with at least two segments separated by dots',
                )
            ],
        ),
        (
            eps(endpoints=[{"addresses": ["10.1.2.3"]}] * 1001),
            [("endpoints", "Too many: 1001: must have at most 1000 items")],
        ),
        (
            eps(ports=[{"name": "http", "port": 80}, {"name": "http", "port": 81}]),
            [("ports[1].name", 'Duplicate value: "http"')],
        ),
        (
            eps(ports=[{"name": "http", "port": 80, "protocol": "HTTP"}]),
            [("ports[0].protocol", 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"')],
        ),
        (
            eps(endpoints=[{"addresses": ["10.1.2.3"], "hostname": "Bad_Host"}]),
            [
                (
                    "endpoints[0].hostname",
                    'Invalid value: "Bad_Host": a lowercase RFC 1123 label must consist of lower case '
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character "
                    "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ],
        ),
        (
            eps(
                endpoints=[{"addresses": ["10.1.2.3"], "hints": {"forZones": [{"name": "a"}, {"name": "a"}]}}]
            ),
            [("endpoints[0].hints.forZones[1].name", 'Duplicate value: "a"')],
        ),
    ],
)
def test_invalid(obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert errors(obj) == expected


def test_address_type_is_immutable() -> None:
    old = eps()
    new = eps("IPv6", [{"addresses": ["2001:db8::1"]}])
    assert errors(new, old) == [("addressType", 'Invalid value: "IPv6": field is immutable')]
    assert errors(eps(endpoints=[{"addresses": ["10.9.9.9"]}]), old) == []
