"""Decoding Kubernetes protobuf bodies into their JSON form (kcm_shared.apimachinery.protobuf).

Bodies are built with a tiny encoder below; the `KUBECTL_*` bodies were captured from kubectl
v1.32.4 posting to a recording server, and their expected values are what
`kubectl create ... --dry-run=client -o json` printed for the same command.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest
from kcm_shared.apimachinery import protobuf
from kcm_shared.apimachinery.protobuf import CONTENT_TYPE, ProtobufError, decode, go_duration

# --- a tiny protobuf encoder --------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative ints go out as 64-bit two's complement, as Go sends them
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def vi(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def ld(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def msg(number: int, *parts: bytes) -> bytes:
    return ld(number, b"".join(parts))


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return msg(number, ld(1, key), ld(2, value))


def envelope(api_version: str, kind: str, *parts: bytes) -> bytes:
    return protobuf.MAGIC + msg(1, ld(1, api_version), ld(2, kind)) + msg(2, *parts)


def quantity(number: int, text: str) -> bytes:
    return msg(number, ld(1, text))


def int_or_string(number: int, value: int | str) -> bytes:
    if isinstance(value, str):
        return msg(number, vi(1, 1), vi(2, 0), ld(3, value))
    return msg(number, vi(1, 0), vi(2, value), ld(3, ""))


# Go's marshaller writes every non-pointer field, zero or not: an empty ObjectMeta looks like this.
EMPTY_META_FIELDS = (ld(2, ""), ld(3, ""), ld(4, ""), ld(5, ""), ld(6, ""), vi(7, 0), msg(8))


def meta(name: str, *extra: bytes) -> bytes:
    return msg(1, ld(1, name), *EMPTY_META_FIELDS, *extra)


# --- whole objects --------------------------------------------------------------------------------


def test_configmap_with_data_binary_data_and_explicit_false_immutable() -> None:
    body = envelope(
        "v1",
        "ConfigMap",
        meta("cm", entry(11, "app", "web")),
        entry(2, "a", "b"),
        entry(2, "empty", ""),
        entry(3, "blob", b"\x00\xff"),
        vi(4, 0),
    )
    assert decode(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "creationTimestamp": None, "labels": {"app": "web"}},
        "data": {"a": "b", "empty": ""},
        "binaryData": {"blob": "AP8="},
        "immutable": False,  # a *bool that was set: JSON keeps false
    }


def test_deployment_with_template_ports_quantities_and_intstr_strategy() -> None:
    container = msg(
        2,
        ld(1, "web"),
        ld(2, "nginx:1.27"),
        msg(6, ld(1, "http"), vi(2, 0), vi(3, 8080), ld(4, "TCP"), ld(5, "")),
        msg(8, msg(1, ld(1, "cpu"), quantity(2, "500m")), msg(2, ld(1, "memory"), quantity(2, "128Mi"))),
        ld(5, ""),
        vi(16, 0),
    )
    rolling = msg(2, int_or_string(1, 1), int_or_string(2, "25%"))
    spec = msg(
        2,
        vi(1, 0),
        msg(2, entry(1, "app", "web")),
        msg(3, meta("", entry(11, "app", "web")), msg(2, container)),
        msg(4, ld(1, "RollingUpdate"), rolling),
        vi(5, 0),
    )
    assert decode(envelope("apps/v1", "Deployment", meta("web"), spec, msg(3))) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "creationTimestamp": None},
        "spec": {
            "replicas": 0,  # *int32: zero is kept, minReadySeconds (int32, omitempty) is not
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "128Mi"}},
                        }
                    ]
                },
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}},
        },
        "status": {},
    }


def test_secret_data_is_base64() -> None:
    body = envelope("v1", "Secret", meta("s"), entry(2, "key", b"\x89PNG\r\n"), entry(2, "pw", "hunter2"))
    assert decode(body)["data"] == {"key": base64.b64encode(b"\x89PNG\r\n").decode(), "pw": "aHVudGVyMg=="}


# Captured from kubectl v1.32.4.
KUBECTL_BODIES = [
    (  # kubectl create deployment web --image=nginx --replicas=0 --port=80
        "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b8010a1f0a0377656212001a0022002a0032003800"
        "42005a0a0a0361707012037765621286010800120c0a0a0a0361707012037765621a6c0a1c0a0012001a0022002a0032"
        "00380042005a0a0a036170701203776562124c122e0a056e67696e7812056e67696e782a00320a0a0010001850220"
        "02a0042006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c20100"
        "22020a00280038001a0c0800100018002000280038001a002200",
        {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {"name": "web", "creationTimestamp": None, "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "nginx",
                                "image": "nginx",
                                "ports": [{"containerPort": 80}],
                                "resources": {},
                            }
                        ]
                    },
                },
                "strategy": {},
            },
            "status": {},
        },
    ),
    (  # kubectl create secret generic s1 --from-literal=password=hunter2 --from-literal=empty=
        "6b3873000a0c0a027631120653656372657412360a120a02733112001a0022002a0032003800420012090a05656d70747"
        "9120012130a0870617373776f7264120768756e746572321a001a002200",
        {
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {"name": "s1", "creationTimestamp": None},
            "data": {"empty": "", "password": "aHVudGVyMg=="},
        },
    ),
    (  # kubectl create service clusterip svc1 --tcp=80:8080 --tcp=443:https
        "6b3873000a0d0a0276311207536572766963651290010a210a047376633112001a0022002a003200380042005a0b0a036170"
        "7012047376633112670a1b0a0738302d38303830120354435018502207080010903f1a0028000a220a093434332d6874"
        "747073120354435018bb03220b080110001a0568747470732800120b0a036170701204737663311a002209436c757374"
        "657249503a00420052005a00600068001a020a001a002200",
        {
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": {"name": "svc1", "creationTimestamp": None, "labels": {"app": "svc1"}},
            "spec": {
                "ports": [
                    {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "443-https", "protocol": "TCP", "port": 443, "targetPort": "https"},
                ],
                "selector": {"app": "svc1"},
                "type": "ClusterIP",
            },
            "status": {"loadBalancer": {}},
        },
    ),
    (  # kubectl create pdb pdb1 --selector=app=web --min-available=50%
        "6b3873000a200a09706f6c6963792f76311213506f6444697372757074696f6e427564676574123d0a140a04706462311200"
        "1a0022002a0032003800420012190a09080110001a03353025120c0a0a0a0361707012037765621a0a08001800200028"
        "0030001a002200",
        {
            "kind": "PodDisruptionBudget",
            "apiVersion": "policy/v1",
            "metadata": {"name": "pdb1", "creationTimestamp": None},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
        },
    ),
    (  # kubectl create token sa1 --duration=1h --audience=api --bound-object-kind=Pod --bound-object-name=p1
        "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e52657175657374123"
        "30a100a0012001a0022002a0032003800420012190a036170691a0f0a03506f64120276311a027031220020901c1a040a"
        "0012001a002200",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"creationTimestamp": None},
            "spec": {
                "audiences": ["api"],
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p1"},
                "expirationSeconds": 3600,
            },
            "status": {"token": "", "expirationTimestamp": None},
        },
    ),
]


@pytest.mark.parametrize(("hex_body", "expected"), KUBECTL_BODIES)
def test_kubectl_bodies_decode_to_what_kubectl_prints_as_json(
    hex_body: str, expected: dict[str, Any]
) -> None:
    assert decode(bytes.fromhex(hex_body)) == expected


# --- field rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "expected_spec"),
    [
        # A nil pointer or slice without omitempty is JSON null; a set pointer keeps its zero.
        ((), {"audiences": None, "boundObjectRef": None, "expirationSeconds": None}),
        ((ld(1, "a"), vi(4, 60)), {"audiences": ["a"], "boundObjectRef": None, "expirationSeconds": 60}),
        ((vi(4, 0),), {"audiences": None, "boundObjectRef": None, "expirationSeconds": 0}),
    ],
)
def test_absent_and_zero_fields_follow_go_json(
    parts: tuple[bytes, ...], expected_spec: dict[str, Any]
) -> None:
    body = envelope("authentication.k8s.io/v1", "TokenRequest", meta("t"), msg(2, *parts))
    assert decode(body)["spec"] == expected_spec


def test_inline_struct_fields_merge_into_the_parent() -> None:
    volume = msg(1, ld(1, "cache"), msg(2, msg(2, ld(1, "Memory"), quantity(2, "1Gi"))))
    pod = envelope("v1", "Pod", meta("p"), msg(2, volume))
    assert decode(pod)["spec"]["volumes"] == [
        {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    ]


def test_named_slice_messages_become_lists() -> None:
    user = msg(2, ld(1, "alice"), msg(4, ld(1, "scopes"), msg(2, ld(1, "read"), ld(1, "write"))))
    body = envelope("authentication.k8s.io/v1", "TokenReview", meta("r"), msg(3, vi(1, 1), user))
    assert decode(body)["status"] == {
        "authenticated": True,
        "user": {"username": "alice", "extra": {"scopes": ["read", "write"]}},
    }


@pytest.mark.parametrize(
    "groups",
    [
        vi(4, 1) + vi(4, 2) + vi(4, 3),
        ld(4, _varint(1) + _varint(2) + _varint(3)),  # packed encoding is accepted too
    ],
)
def test_repeated_integers(groups: bytes) -> None:
    body = envelope("v1", "Pod", meta("p"), msg(2, msg(14, groups)))
    assert decode(body)["spec"]["securityContext"]["supplementalGroups"] == [1, 2, 3]


@pytest.mark.parametrize(("value", "expected"), [(-5, -5), (1_000_000_000, 1_000_000_000), (0, 0)])
def test_negative_and_large_int32(value: int, expected: int) -> None:
    body = envelope("scheduling.k8s.io/v1", "PriorityClass", meta("pc"), vi(2, value))
    assert decode(body)["value"] == expected


def test_unknown_field_numbers_of_every_wire_type_are_skipped() -> None:
    fixed64 = _varint(900 << 3 | 1) + struct.pack("<d", 1.5)
    fixed32 = _varint(901 << 3 | 5) + b"\0\0\0\0"
    body = envelope(
        "v1", "ConfigMap", meta("cm"), vi(99, 7), ld(98, "x"), fixed64, fixed32, entry(2, "a", "b")
    )
    assert decode(body)["data"] == {"a": "b"}


def test_option_kinds_decode_in_any_group_version() -> None:
    body = envelope("apps/v1", "DeleteOptions", vi(1, 0), ld(4, "Foreground"), ld(5, "All"))
    assert decode(body) == {
        "apiVersion": "apps/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
    }


# --- apimachinery types with their own JSON form --------------------------------------------------


def _managed_time(time_message: bytes) -> Any:
    body = envelope("v1", "ConfigMap", meta("cm", msg(17, ld(1, "kubectl"), time_message)))
    return decode(body)["metadata"]["managedFields"][0].get("time")


@pytest.mark.parametrize(
    ("time_message", "expected"),
    [
        (msg(4, vi(1, 1767323045), vi(2, 999_000_000)), "2026-01-02T03:04:05Z"),
        (msg(4, vi(1, 0), vi(2, 0)), "1970-01-01T00:00:00Z"),  # explicit zeros are the epoch
        (msg(4), None),  # an empty message is Go's zero time
        (b"", None),
    ],
)
def test_time(time_message: bytes, expected: str | None) -> None:
    assert _managed_time(time_message) == expected


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((vi(1, 1767323045), vi(2, 123_456_789)), "2026-01-02T03:04:05.123456Z"),
        ((vi(1, 1767323045),), "2026-01-02T03:04:05.000000Z"),
        ((), None),
    ],
)
def test_micro_time(parts: tuple[bytes, ...], expected: str | None) -> None:
    body = envelope("events.k8s.io/v1", "Event", meta("e"), msg(2, *parts))
    assert decode(body)["eventTime"] == expected


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (1_500_000_000, "1.5s"),
        (4_000_123_000, "4.000123s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (-90_000_000_000, "-1m30s"),
    ],
)
def test_go_duration_strings(ns: int, text: str) -> None:
    assert go_duration(ns) == text


def test_duration_message_is_a_go_duration_string() -> None:
    # No stable API field uses meta/v1 Duration today, so decode the message on its own.
    raw = vi(1, 300_000_000_000)
    assert protobuf._message(raw, 0, len(raw), "k8s.io.apimachinery.pkg.apis.meta.v1.Duration") == "5m0s"


def test_raw_extension_and_fields_v1_are_embedded_json() -> None:
    fields_v1 = msg(7, ld(1, json.dumps({"f:data": {".": {}}})))
    body = envelope(
        "apps/v1",
        "ControllerRevision",
        meta("rev", msg(17, ld(1, "kubectl"), fields_v1)),
        msg(2, ld(1, json.dumps({"spec": {"replicas": 2}}))),
        vi(3, 4),
    )
    assert decode(body) == {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": "rev",
            "creationTimestamp": None,
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {".": {}}}}],
        },
        "data": {"spec": {"replicas": 2}},
        "revision": 4,
    }


@pytest.mark.parametrize(
    ("quota_value", "expected"),
    [(quantity(2, "1Gi"), "1Gi"), (msg(2), "0")],
)
def test_quantity(quota_value: bytes, expected: str) -> None:
    body = envelope("v1", "ResourceQuota", meta("q"), msg(2, msg(1, ld(1, "memory"), quota_value)))
    assert decode(body)["spec"]["hard"] == {"memory": expected}


# --- errors ---------------------------------------------------------------------------------------

CONFIGMAP = envelope("v1", "ConfigMap", meta("cm"), entry(2, "a", "b"))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "k8s"),
        (b'{"kind": "ConfigMap"}', "k8s"),
        (b"k8s\x01" + CONFIGMAP[4:], "k8s"),
        (CONFIGMAP[:-1], "truncated"),
        (CONFIGMAP[:10], "truncated"),
        (CONFIGMAP + b"\x80", "truncated"),
        (envelope("v1", "Frobnicator", meta("x")), "Frobnicator"),
        (envelope("example.com/v1", "ConfigMap", meta("x")), "example.com/v1"),
        (envelope("v1", "ConfigMap", vi(1, 3)), "wire type"),
        (envelope("v1", "ConfigMap", ld(4, "yes")), "wire type"),
        (envelope("v1", "ConfigMap", ld(1, b"\x0a\x02\xff\xfe")), "UTF-8"),
        (envelope("apps/v1", "ControllerRevision", msg(2, ld(1, "{not json"))), "JSON"),
        (protobuf.MAGIC + msg(1, ld(1, "v1"), ld(2, "ConfigMap")) + ld(3, "gzip"), "encoding"),
    ],
)
def test_bad_bodies_raise_protobuf_error(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode(body)


def test_protobuf_error_is_a_value_error_and_content_type_is_the_kubernetes_one() -> None:
    assert issubclass(ProtobufError, ValueError)
    assert CONTENT_TYPE == "application/vnd.kubernetes.protobuf"


# --- the schema file ------------------------------------------------------------------------------

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}


def test_every_type_the_schema_names_is_a_scalar_or_a_known_message() -> None:
    known = set(protobuf._MESSAGES) | SCALARS
    for name, message in protobuf._MESSAGES.items():
        for f in message.fields.values():
            types = (f.key_type, f.value_type) if f.type == "map" else (f.type,)
            assert set(types) <= known, f"{name}.{f.json_name}: {types}"


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "ConfigMap"),
        ("v1", "Namespace"),
        ("v1", "ServiceAccount"),
        ("v1", "ResourceQuota"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "CronJob"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("policy/v1", "Eviction"),
        ("authentication.k8s.io/v1", "TokenRequest"),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("coordination.k8s.io/v1", "Lease"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("storage.k8s.io/v1", "StorageClass"),
        ("certificates.k8s.io/v1", "CertificateSigningRequest"),
        ("events.k8s.io/v1", "Event"),
        ("networking.k8s.io/v1", "Ingress"),
    ],
)
def test_kinds_kubectl_creates_are_in_the_schema(api_version: str, kind: str) -> None:
    assert decode(envelope(api_version, kind, meta("x")))["metadata"]["name"] == "x"
