"""Who wrote what: an audit log of every write, as kube-apiserver's `--audit-log-path` writes it.

`Server.handle` calls `AuditLog.record` once each mutating request (POST, PUT, PATCH, DELETE)
has been answered; reads are not recorded. One JSON line per request in the shape of
`audit.k8s.io/v1` Events at level Metadata (verb, objectRef, user, userAgent, response code,
timestamps), so the tools that read kube-apiserver's log read this one. The controllers'
User-Agent (`kcm/<controller> (<instance>)`) tells apart the replicas of one controller;
tests use it to check that a replica that lost a partition wrote nothing after its successor.
Lines are appended in the order requests complete, which is the order their effects were
stored (the store is single-threaded).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import msgspec

MUTATING = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class ObjectRef:
    resource: str
    namespace: str
    name: str
    api_group: str
    api_version: str
    subresource: str


def _timestamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditLog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Line-buffered: a reader (a test, `tail -f`) sees each write once it is answered.
        self._file: IO[str] = path.open("a", buffering=1, encoding="utf-8")

    def record(
        self,
        *,
        method: str,
        uri: str,
        user_agent: str,
        source_ip: str,
        ref: ObjectRef | None,
        code: int,
        received: datetime,
        user: tuple[str, list[str]] | None = None,
    ) -> None:
        verb = MUTATING.get(method)
        if verb is None:
            return
        if verb == "delete" and ref is not None and not ref.name:
            verb = "deletecollection"
        event: dict[str, object] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb,
            "sourceIPs": [source_ip] if source_ip else [],
            "userAgent": user_agent,
            **({"user": {"username": user[0], "groups": user[1]}} if user is not None else {}),
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": _timestamp(received),
            "stageTimestamp": _timestamp(datetime.now(UTC)),
        }
        if ref is not None:
            event["objectRef"] = {
                k: v
                for k, v in (
                    ("resource", ref.resource),
                    ("namespace", ref.namespace),
                    ("name", ref.name),
                    ("apiGroup", ref.api_group),
                    ("apiVersion", ref.api_version),
                    ("subresource", ref.subresource),
                )
                if v
            }
        self._file.write(msgspec.json.encode(event).decode() + "\n")

    def close(self) -> None:
        self._file.close()
