"""The strategic merge patches `fakeclient.FakeClient` applies to the objects it holds: the part of
strategic merge patch that controllers send.

- JSON merge patch (RFC 7386) is `kcm_shared.apimachinery.jsonmerge.merge_patch`, the API
  server's own.
- `strategic_merge_patch` is a merge patch that also knows, by field name (`MERGE_KEYS`,
  `MERGED_PRIMITIVES`), the lists upstream's built-in types merge instead of replacing:
  ownerReferences by uid, conditions by type, containers by name, finalizers as a set; and the
  directives controllers use: `{"$patch": "delete", <key>: ...}` in such a list,
  `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` and `$retainKeys` are dropped.
  The API server (`kcm_apiserver.patch`) reads merge keys from the OpenAPI schema instead; the
  shared runtime may not import it, and a field name means the same in every type controllers
  patch.

It returns a new document and leaves its arguments alone.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS = {
    "ownerReferences": "uid",
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
}
MERGED_PRIMITIVES = frozenset({"finalizers", "podCIDRs"})
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
_DROPPED_DIRECTIVES = ("$setElementOrder/", "$retainKeys")


def strategic_merge_patch(doc: Any, patch: Any) -> Any:
    """`doc` with the strategic merge patch `patch` applied (module docstring: what is known)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = key[len(_DELETE_FROM_PRIMITIVE_LIST) :]
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in value]
        elif key.startswith(_DROPPED_DIRECTIVES):
            continue
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            out[key] = _merge_by_key(out.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_PRIMITIVES:
            have = list(out.get(key) or [])
            out[key] = have + [v for v in value if v not in have]
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_by_key(have: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = copy.deepcopy(have)
    for item in patch:
        at = next((i for i, old in enumerate(merged) if old.get(merge_key) == item.get(merge_key)), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del merged[at]
        elif at is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[at] = strategic_merge_patch(merged[at], item)
    return merged
