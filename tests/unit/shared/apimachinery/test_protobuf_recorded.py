"""Decoding what kube-apiserver v1.32 really sends as protobuf (kcm_shared.apimachinery.protobuf).

fixtures/kube_apiserver_protobuf.json was recorded by tools/record_protobuf.py from a
`kcm dev --apiserver=upstream` stack: each read's JSON and protobuf answers at one
resourceVersion, and a watch of the same events in both media types. The expectation of every
test here is kube-apiserver's own JSON.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from kcm_shared.apimachinery import protobuf

RECORDED = json.loads((Path(__file__).parent / "fixtures/kube_apiserver_protobuf.json").read_text())


def test_recorded_from_kube_apiserver_v1_32() -> None:
    assert RECORDED["server"].startswith("v1.32.")


@pytest.mark.parametrize("name", sorted(RECORDED["reads"]))
def test_every_recorded_body_decodes_to_the_servers_own_json(name: str) -> None:
    read = RECORDED["reads"][name]
    assert protobuf.decode(base64.b64decode(read["protobuf"])) == json.loads(read["json"])


def test_the_recordings_cover_lists_pages_and_errors() -> None:
    reads = {name: json.loads(r["json"]) for name, r in RECORDED["reads"].items()}
    assert reads["podlist"]["kind"] == "PodList" and reads["podlist"]["items"]
    assert reads["configmaplist_page"]["metadata"]["continue"]
    assert reads["endpointslicelist"]["items"] == []  # empty: absent on the wire
    assert reads["status_404"]["reason"] == "NotFound" and reads["status_404"]["code"] == 404


def watch_frames() -> tuple[bytes, list[dict[str, Any]]]:
    watch = RECORDED["watch"]
    lines = [json.loads(line) for line in watch["json"].splitlines()]
    return base64.b64decode(watch["protobuf"]), lines


def test_watch_frames_decode_to_the_json_lines_of_the_same_events() -> None:
    stream, lines = watch_frames()
    frames, rest = protobuf.split_frames(stream, 1 << 20)
    assert rest == b"" and len(lines) >= 2
    assert [protobuf.decode_watch_event(f) for f in frames] == lines


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 100, 4096])
def test_a_stream_cut_anywhere_yields_the_same_events(chunk: int) -> None:
    stream, lines = watch_frames()
    events, partial = [], b""
    for at in range(0, len(stream), chunk):
        frames, partial = protobuf.split_frames(partial + stream[at : at + chunk], 1 << 20)
        events += [protobuf.decode_watch_event(f) for f in frames]
    assert partial == b"" and events == lines


def test_a_frame_over_the_limit_is_refused_before_it_is_buffered() -> None:
    with pytest.raises(protobuf.ProtobufError, match="over the limit"):
        protobuf.split_frames(struct.pack(">I", 1 << 30) + b"x", 1 << 20)


def test_a_frame_that_is_no_watch_event_is_an_error() -> None:
    stream, _ = watch_frames()
    frames, _ = protobuf.split_frames(stream, 1 << 20)
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode_watch_event(frames[0][: len(frames[0]) // 2])
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode_watch_event(b"")


def test_the_field_table_knows_built_in_group_versions_only() -> None:
    assert protobuf.knows("v1") and protobuf.knows("apps/v1") and protobuf.knows("coordination.k8s.io/v1")
    assert not protobuf.knows("apiextensions.k8s.io/v1") and not protobuf.knows("example.com/v1")
