"""Identities, owner references and metadata for the garbage collector's unit tests
(test_graph, test_dump): `ident(name, uid, ...)`, `ref(owner, block=, kind=)`,
`meta(identity, *owners, deleting=, finalizers=)`."""

from __future__ import annotations

import datetime as dt

from kcm_controllers.garbagecollector import graph
from kcm_shared.apimachinery import codec

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def ident(
    name: str, uid: str, namespace: str = "ns", kind: str = "ConfigMap", api_version: str = "v1"
) -> graph.Identity:
    return graph.Identity(api_version, kind, name, uid, namespace)


def ref(owner: graph.Identity, *, block: bool | None = None, kind: str | None = None) -> codec.OwnerReference:
    return codec.OwnerReference(
        api_version=owner.api_version,
        kind=kind or owner.kind,
        name=owner.name,
        uid=owner.uid,
        block_owner_deletion=block,
    )


def meta(
    i: graph.Identity,
    *owners: codec.OwnerReference,
    deleting: bool = False,
    finalizers: tuple[str, ...] = (),
) -> codec.ObjectMeta:
    return codec.ObjectMeta(
        name=i.name,
        namespace=i.namespace,
        uid=i.uid,
        owner_references=list(owners),
        finalizers=list(finalizers),
        deletion_timestamp=NOW if deleting else None,
    )
