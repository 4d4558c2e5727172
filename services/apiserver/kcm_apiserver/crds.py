"""Serving CustomResourceDefinitions: a stored CRD becomes resource types in the registry.

`operations` calls `register` after every CRD write and `unregister` when one is gone;
the answer of `register` is the CRD with upstream's status (acceptedNames, the
NamesAccepted and Established conditions, storedVersions) for the caller to store.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from kcm_apiserver.registry import ALL_VERBS, Registry, ResourceType

Obj = dict[str, Any]


class CrdRegistrar:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._crds: dict[str, Obj] = {}
        # Moves on every register and unregister, the only run-time changes to the registry:
        # documents built from the registry and the CRDs are cached under it.
        self.revision = 0

    def crds(self) -> list[Obj]:
        return list(self._crds.values())

    def register(self, crd: Obj) -> Obj | None:
        """Serve the CRD's versions; returns it with an established status, None if it is terminating."""
        if crd["metadata"].get("deletionTimestamp"):
            self.unregister(crd)
            return None
        spec = crd["spec"]
        names = spec["names"]
        versions = [v for v in spec.get("versions", []) if v.get("served", True)]
        storage = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), versions[0]["name"])
        types = [
            ResourceType(
                group=spec["group"],
                version=v["name"],
                resource=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames", [])),
                categories=tuple(names.get("categories", [])),
                verbs=ALL_VERBS,
                subresources=tuple(sorted((v.get("subresources") or {}).keys())),
                model=None,
                storage_version=storage,
                has_status="status" in (v.get("subresources") or {}),
            )
            for v in versions
        ]
        self._registry.remove(spec["group"], names["plural"])
        self._registry.add(types)
        self._crds[crd["metadata"]["name"]] = crd
        self.revision += 1
        return _established(crd, storage)

    def unregister(self, crd: Obj) -> None:
        spec = crd["spec"]
        self._registry.remove(spec["group"], spec["names"]["plural"])
        self._crds.pop(crd["metadata"]["name"], None)
        self.revision += 1


def _established(crd: Obj, storage: str) -> Obj:
    out = copy.deepcopy(crd)
    status = out.setdefault("status", {})
    status["acceptedNames"] = copy.deepcopy(crd["spec"]["names"])
    status["acceptedNames"].setdefault("singular", crd["spec"]["names"]["kind"].lower())
    stored = status.setdefault("storedVersions", [])
    if storage not in stored:
        stored.append(storage)
    existing = {c["type"]: c for c in status.get("conditions", [])}
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = []
    for ctype, reason, message in (
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ):
        old = existing.get(ctype)
        if old and old.get("status") == "True":
            conditions.append(old)
        else:
            conditions.append(
                {
                    "type": ctype,
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
            )
    status["conditions"] = conditions
    return out
