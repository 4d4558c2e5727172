"""The three PATCH body formats: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

The PATCH handler picks one by content type and applies it to the live object before
validation. Strategic merge follows upstream's apimachinery `strategicpatch` package: maps
merge recursively, lists whose field is tagged `patchStrategy: merge` merge by
`patchMergeKey` (or union, for primitives), every other list is replaced, and the
`$patch`, `$retainKeys`, `$setElementOrder/` and `$deleteFromPrimitiveList/` directives
are honoured. JSON merge patch and the deep copy every format starts from are
`kcm_shared.apimachinery.jsonmerge`'s, shared with the testing kit's fake client;
server-side apply reuses `json_equal`.

All functions return new documents and never mutate their arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, TypeGuard

from kcm_shared.apimachinery.jsonmerge import deep_copy, merge_patch, merge_patch_into

from kcm_apiserver import typeinfo
from kcm_apiserver.typeinfo import TypeInfo

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"
_ARRAY_INDEX = re.compile(r"-?[0-9]+")


class PatchError(ValueError):
    """The patch document is malformed, or a JSON patch `test` operation failed."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: Python's `True == 1` must not hold here."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(b, dict | list):
        return False
    return bool(a == b)


# --- JSON patch (RFC 6902) --------------------------------------------------------------------


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply a list of RFC 6902 operations in order; any failure rejects the whole patch."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    result = deep_copy(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError(f"json patch operation must be an object, got {json.dumps(op)}")
        result = _apply_op(result, op)
    return result


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    path = _string_member(op, "path")
    if kind == "add":
        return _add(doc, path, deep_copy(_value_member(op)))
    if kind == "remove":
        doc, _ = _remove(doc, path)
        return doc
    if kind == "replace":
        return _replace(doc, path, deep_copy(_value_member(op)))
    if kind == "move":
        source = _string_member(op, "from")
        if source == path:
            _get(doc, source)
            return doc
        if path.startswith(source + "/"):
            raise PatchError(f"move operation cannot move {source} into its own child {path}")
        doc, value = _remove(doc, source)
        return _add(doc, path, value)
    if kind == "copy":
        return _add(doc, path, deep_copy(_get(doc, _string_member(op, "from"))))
    if kind == "test":
        expected = _value_member(op)
        try:
            actual = _get(doc, path)
        except PatchError:
            # A missing member equals null, as upstream's json-patch library treats it.
            if expected is None:
                return doc
            raise PatchError(f"testing value {path} failed: value is missing") from None
        if not json_equal(actual, expected):
            raise PatchError(f"testing value {path} failed: {json.dumps(actual)} != {json.dumps(expected)}")
        return doc
    raise PatchError(f"unexpected json patch operation kind {json.dumps(kind)}")


def _string_member(op: dict[str, Any], name: str) -> str:
    value = op.get(name)
    if not isinstance(value, str):
        raise PatchError(f"json patch operation {json.dumps(op)} is missing string member {name!r}")
    return value


def _value_member(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise PatchError(f"json patch {op.get('op')} operation on {op.get('path')} is missing a value")
    return op["value"]


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"json pointer {path!r} must be empty or start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    """The container holding the last token of `path`, and that token."""
    tokens = _pointer(path)
    container = doc
    for depth, token in enumerate(tokens[:-1]):
        container = _child_of(container, token, "/" + "/".join(tokens[: depth + 1]))
    return container, tokens[-1]


def _child_of(container: Any, token: str, where: str) -> Any:
    if isinstance(container, dict):
        if token not in container:
            raise PatchError(f"doc is missing path: {where}")
        return container[token]
    if isinstance(container, list):
        return container[_index(container, token, where, allow_end=False)]
    raise PatchError(f"doc is missing path: {where}")


def _index(array: list[Any], token: str, where: str, *, allow_end: bool) -> int:
    # int() alone would also accept " 1" and "1_0".
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchError(f"invalid array index {token!r} in {where}")
    index = int(token)
    # Negative indices count from the end, as upstream's json-patch library allows.
    if index < 0:
        index += len(array)
    limit = len(array) if allow_end else len(array) - 1
    if not 0 <= index <= limit:
        raise PatchError(f"array index {token} out of bounds in {where}")
    return index


def _get(doc: Any, path: str) -> Any:
    if path == "":
        return doc
    container, token = _parent(doc, path)
    return _child_of(container, token, path)


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        container[token] = value
    elif isinstance(container, list):
        if token == "-":
            container.append(value)
        else:
            container.insert(_index(container, token, path, allow_end=True), value)
    else:
        raise PatchError(f"add operation does not apply: doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    if path == "":
        raise PatchError("cannot remove the whole document")
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        if token not in container:
            raise PatchError(f"unable to remove nonexistent key: {path}")
        return doc, container.pop(token)
    if isinstance(container, list):
        return doc, container.pop(_index(container, token, path, allow_end=False))
    raise PatchError(f"remove operation does not apply: doc is missing path: {path}")


def _replace(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    container, token = _parent(doc, path)
    if isinstance(container, dict):
        # Upstream's json-patch library (v4, which kube-apiserver uses) lets replace create a
        # missing member: `kubectl rollout undo` replaces /metadata/annotations unconditionally.
        container[token] = value
    elif isinstance(container, list):
        container[_index(container, token, path, allow_end=False)] = value
    else:
        raise PatchError(f"replace operation does not apply: doc is missing path: {path}")
    return doc


# --- Strategic merge patch --------------------------------------------------------------------


def strategic_merge_patch(
    doc: dict[str, Any], patch: dict[str, Any], info: TypeInfo | None
) -> dict[str, Any]:
    """Apply a strategic merge patch; `info` None (no schema) falls back to a JSON merge patch."""
    if not isinstance(doc, dict) or not isinstance(patch, dict):
        raise PatchError("strategic merge patch: document and patch must be JSON objects")
    if info is None:
        result: dict[str, Any] = merge_patch(doc, patch)
        return result
    return _merge_map(deep_copy(doc), patch, info)


def _merges(info: TypeInfo | None) -> TypeGuard[TypeInfo]:
    return info is not None and "merge" in info.patch_strategy


def _merge_map(original: dict[str, Any], patch: dict[str, Any], info: TypeInfo | None) -> dict[str, Any]:
    """Merge `patch` into `original`, which the caller owns; returns the merged map."""
    if info is None:
        merged: dict[str, Any] = merge_patch_into(original, patch)
        return merged
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            return {k: deep_copy(v) for k, v in patch.items() if k != _DIRECTIVE}
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {directive} in map: {json.dumps(patch)}")
    rest = dict(patch)
    _apply_retain_keys(original, rest)
    _apply_element_orders(original, rest, info)
    deletions: list[tuple[str, Any]] = []
    for key, value in rest.items():
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            deletions.append((key, value))
        elif value is None:
            original.pop(key, None)
        elif key in original:
            original[key] = _merge_value(original[key], value, typeinfo.child(info, key))
        else:
            original[key] = _fresh_value(value, typeinfo.child(info, key))
    for key, value in deletions:
        _delete_from_primitive_list(original, key, value)
    return original


def _merge_value(original: Any, patch: Any, info: TypeInfo | None) -> Any:
    if info is None:
        return merge_patch_into(original, patch)
    if isinstance(original, dict) and isinstance(patch, dict):
        if "replace" in info.patch_strategy:
            return deep_copy(patch)
        return _merge_map(original, patch, info)
    if isinstance(original, list) and isinstance(patch, list) and _merges(info):
        return _merge_list(original, patch, info)
    return deep_copy(patch)


def _fresh_value(patch: Any, info: TypeInfo | None) -> Any:
    """A patch value for a field the original lacks, with its directives resolved."""
    if info is None:
        return merge_patch_into(None, patch)
    if isinstance(patch, dict) and "replace" not in info.patch_strategy:
        return _merge_map({}, patch, info)
    if isinstance(patch, list) and _merges(info):
        return _merge_list([], patch, info)
    return deep_copy(patch)


def _apply_retain_keys(original: dict[str, Any], rest: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in rest:
        return
    retained = rest.pop(_RETAIN_KEYS)
    if not isinstance(retained, list) or not all(isinstance(k, str) for k in retained):
        raise PatchError("invalid patch format of retainKeys")
    keep = set(retained)
    for key, value in rest.items():
        if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
            continue
        if key not in keep:
            raise PatchError(f"invalid patch format of retainKeys: {key!r} is not in the $retainKeys list")
    for key in [k for k in original if k not in keep]:
        del original[key]


def _delete_from_primitive_list(original: dict[str, Any], directive_key: str, values: Any) -> None:
    key = directive_key[len(_DELETE_FROM_PRIMITIVE_LIST) :]
    if not key or not isinstance(values, list):
        raise PatchError("invalid patch format of primitive list")
    current = original.get(key)
    if current is None:
        return
    if not isinstance(current, list):
        raise PatchError(f"{directive_key}: {key} is not a list")
    doomed = {_identity(v) for v in values}
    original[key] = [v for v in current if _identity(v) not in doomed]


def _apply_element_orders(original: dict[str, Any], rest: dict[str, Any], info: TypeInfo) -> None:
    """Merge each list named by a `$setElementOrder/` directive and put it in the requested order.

    Precedence is the directive's order, then the patch list's, then the live list's; live
    items the directive does not name keep their position relative to their neighbours.
    """
    for directive_key in [k for k in rest if k.startswith(_SET_ELEMENT_ORDER)]:
        order = rest.pop(directive_key)
        key = directive_key[len(_SET_ELEMENT_ORDER) :]
        if not key or not isinstance(order, list):
            raise PatchError("invalid patch format of setElementOrder list")
        live = original.get(key)
        patch_list = rest.pop(key, None)
        if live is None and patch_list is None:
            continue
        if (live is not None and not isinstance(live, list)) or (
            patch_list is not None and not isinstance(patch_list, list)
        ):
            raise PatchError(f"{directive_key}: {key} is not a list")
        field = typeinfo.child(info, key)
        merge_key = field.patch_merge_key if field is not None else None
        _validate_element_order(patch_list or [], order, merge_key)
        server_order = list(live or [])
        if patch_list is None:
            merged = live or []
        elif live is None:
            merged = _fresh_value(patch_list, field)
        elif _merges(field):
            merged = _merge_list(live, patch_list, field)
        else:
            merged = deep_copy(patch_list)
        original[key] = _order_merged(merged, order, server_order, merge_key)


def _validate_element_order(patch_list: list[Any], order: list[Any], merge_key: str | None) -> None:
    """Every non-directive patch item must appear in `order`, in the same relative order."""
    items = [p for p in patch_list if not (isinstance(p, dict) and _DIRECTIVE in p)]
    position = 0
    for wanted in order:
        if position == len(items):
            return
        if _item_identity(items[position], merge_key) == _item_identity(wanted, merge_key):
            position += 1
    if position < len(items):
        raise PatchError(
            f"the order in patch list {json.dumps(patch_list)} doesn't match "
            f"$setElementOrder list {json.dumps(order)}"
        )


def _merge_list(original: list[Any], patch: list[Any], info: TypeInfo) -> list[Any]:
    """Merge a `patchStrategy: merge` list: by merge key for objects, as a union for primitives."""
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    merge_key = info.patch_merge_key
    if kind != "map":
        merged = _dedupe([*original, *deep_copy(patch)])
        return _order_merged(merged, patch, original, None)
    if not merge_key:
        raise PatchError("cannot merge lists of objects without a patchMergeKey")
    for item in original:
        _require_merge_key(item, merge_key)
    original, patch = _apply_list_directives(original, patch, merge_key, info.elem())
    server_order = list(original)
    for item in patch:
        _require_merge_key(item, merge_key)
        index = _find_by_key(original, merge_key, item[merge_key])
        if index is None:
            original.append(_merge_map({}, item, info.elem()))
        else:
            original[index] = _merge_map(original[index], item, info.elem())
    return _order_merged(original, patch, server_order, merge_key)


def _apply_list_directives(
    original: list[Any], patch: list[Any], merge_key: str, elem: TypeInfo | None
) -> tuple[list[Any], list[Any]]:
    """Resolve `$patch` items: delete drops matching live items, replace discards the live list."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            _require_merge_key(item, merge_key)
            doomed = _identity(item[merge_key])
            original = [o for o in original if _identity(o[merge_key]) != doomed]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {json.dumps(item)}")
    if replace:
        return [_merge_map({}, item, elem) for item in plain], []
    return original, plain


def _order_merged(
    merged: list[Any], order: list[Any], server_order: list[Any], merge_key: str | None
) -> list[Any]:
    """Put items named by `order` in that order and weave the remaining live items back in.

    Upstream's rule: a live-only item goes before the next ordered item only if the live
    list already had it before that item; items new to the live list therefore come first.
    """
    wanted = _positions(order, merge_key)
    ordered = [m for m in merged if _item_identity(m, merge_key) in wanted]
    server_only = [m for m in merged if _item_identity(m, merge_key) not in wanted]
    live = _positions(server_order, merge_key)
    ordered.sort(key=lambda m: wanted[_item_identity(m, merge_key)])
    server_only.sort(key=lambda m: live.get(_item_identity(m, merge_key), len(live)))
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(ordered):
        if j == len(ordered):
            result.append(server_only[i])
            i += 1
            continue
        if i < len(server_only):
            left = live.get(_item_identity(server_only[i], merge_key))
            right = live.get(_item_identity(ordered[j], merge_key))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
                continue
        result.append(ordered[j])
        j += 1
    return result


def _positions(items: Iterable[Any], merge_key: str | None) -> dict[Any, int]:
    positions: dict[Any, int] = {}
    for index, item in enumerate(items):
        positions.setdefault(_item_identity(item, merge_key), index)
    return positions


def _element_kind(*lists: list[Any]) -> str:
    kinds = {_json_kind(v) for items in lists for v in items}
    if "list" in kinds:
        raise PatchError("lists of lists are not supported")
    if len(kinds) > 1:
        raise PatchError(f"list element types are not identical: {sorted(kinds)}")
    return kinds.pop()


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else "string"


def _identity(value: Any) -> Any:
    """A hashable stand-in for a JSON value that keeps `true` and `1` apart."""
    if isinstance(value, dict | list):
        return ("json", json.dumps(value, sort_keys=True))
    return (isinstance(value, bool), value)


def _item_identity(item: Any, merge_key: str | None) -> Any:
    if merge_key is None:
        return _identity(item)
    _require_merge_key(item, merge_key)
    return _identity(item[merge_key])


def _require_merge_key(item: Any, merge_key: str) -> None:
    if not isinstance(item, dict):
        raise PatchError(f"expected a map, but received {json.dumps(item)}")
    if merge_key not in item:
        raise PatchError(f"map: {json.dumps(item)} does not contain declared merge key: {merge_key}")


def _find_by_key(items: list[Any], merge_key: str, value: Any) -> int | None:
    wanted = _identity(value)
    for index, item in enumerate(items):
        if _identity(item[merge_key]) == wanted:
            return index
    return None


def _dedupe(items: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    unique = []
    for item in items:
        identity = _identity(item)
        if identity not in seen:
            seen.add(identity)
            unique.append(item)
    return unique
