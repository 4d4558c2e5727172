"""The few fields of a watched or listed object the benchmarks read: one msgspec view for every
workload kind (decoding only these fields keeps the watching client off the CPU it measures).

Used by the scripts in bench/ that watch pods and their controllers' objects.
"""

from __future__ import annotations

import aiohttp
import msgspec

from benchlib import call


class Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""
    generation: int = 0
    annotations: dict[str, str] | None = None


class Spec(msgspec.Struct):
    nodeName: str = ""


class Status(msgspec.Struct):
    phase: str = ""
    conditions: list[Condition] = msgspec.field(default_factory=list)
    observedGeneration: int = 0
    replicas: int = 0
    readyReplicas: int = 0
    availableReplicas: int = 0
    updatedReplicas: int = 0
    numberAvailable: int = 0
    succeeded: int = 0
    used: dict[str, str] | None = None


class Object(msgspec.Struct):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: Spec = msgspec.field(default_factory=Spec)
    status: Status = msgspec.field(default_factory=Status)


class Event(msgspec.Struct):
    type: str
    object: Object


class List(msgspec.Struct):
    items: list[Object] = msgspec.field(default_factory=list)
    metadata: Meta = msgspec.field(default_factory=Meta)


EVENTS = msgspec.json.Decoder(Event)


def true_condition(obj: Object, condition: str) -> bool:
    return any(c.type == condition and c.status == "True" for c in obj.status.conditions)


async def list_of(session: aiohttp.ClientSession, url: str, **params: str) -> List:
    return msgspec.json.decode(await call(session, "GET", url, params=params), type=List)
