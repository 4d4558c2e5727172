"""A fake API server behind `kubeclient.KubeClient`'s own methods, for tests (client-go's fake
clientset with its object tracker is the model).

- `FakeClient` is a `KubeClient`: a controller under test calls `get`, `create`, `update`,
  `patch`, `delete`, `request` or `request_bytes` as it does in production (paths, bodies,
  patch types and priorities go through the real methods), and every call ends in one place
  that records it and answers it. Watches are not served.
- Objects are held by path (`objects`, filled with `add`): creates name them (`generateName`
  gets a counter), assign a uid and resourceVersion; updates and patches check a
  resourceVersion (and patches a uid) given in the body as the API server does, and answer
  409 Conflict when it is stale; deletes remove the object, or only mark it deleted while it
  has finalizers; GET of a collection lists it. A `status` or `finalize` subresource writes
  only the status, or only `spec.finalizers`. Merge and strategic merge patches are applied
  (`kcm_shared.testing.patching`); a JSON or apply patch raises NotImplementedError.
- Every call sent is recorded as an `Action` (client-go's verbs: get, list, create, update,
  patch, delete, delete-collection) in `actions`, before it is answered, failed or not; a
  write its `write_guard` refuses (as `KubeClient`'s does, fencing) is never sent.
- `fail(verb, path, error)` makes matching calls raise `error` instead, `times` times (None:
  always); errors with upstream's codes and reasons come from `not_found`, `already_exists`,
  `conflict`.
- A test that needs another answer subclasses and overrides `handle` (calling
  `super().handle` for the rest).

Not served on purpose: label and field selectors (params are recorded, not applied), the
garbage collector's work (a delete's propagationPolicy is recorded, dependents stay), admission
and validation.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kcm_shared.apimachinery import jsonmerge
from kcm_shared.client import kubeclient
from kcm_shared.testing import patching

Obj = dict[str, Any]

WRITES = ("create", "update", "patch", "delete", "delete-collection")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_PATCH_TYPES = {content_type: name for name, content_type in kubeclient.PATCH_TYPES.items()}
# Subresources of a Namespace, which would otherwise read as a namespaced collection's path.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class Action:
    """One call the client received (client-go's testing.Action): `body` as sent, decoded."""

    verb: str
    path: str
    body: Any = None
    patch_type: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    priority: kubeclient.Priority = kubeclient.Priority.NORMAL


@dataclass(frozen=True)
class Where:
    """What an API path names: a collection, or an object in it and maybe a subresource."""

    collection: str  # e.g. /api/v1/namespaces/ns/pods
    resource: str
    name: str = ""
    subresource: str = ""
    group: str = ""

    @property
    def object_path(self) -> str:
        return f"{self.collection}/{self.name}"

    @property
    def qualified(self) -> str:
        """The resource as the API server's messages name it: `jobs.batch`, `pods`."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


def where(path: str) -> Where:
    """Split an API path as the API server's request info does (`/api/v1/...`, `/apis/g/v/...`)."""
    parts = path.strip("/").split("/")
    base = 2 if parts[0] == "api" else 3
    rest = parts[base:]
    head = parts[:base]
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES)
    ):
        head, rest = parts[: base + 2], rest[2:]
    collection = "/" + "/".join([*head, rest[0]])
    group = parts[1] if parts[0] == "apis" else ""
    return Where(collection, rest[0], rest[1] if len(rest) > 1 else "", "/".join(rest[2:]), group)


def _status_error(code: int, reason: str, message: str, resource: str, name: str) -> kubeclient.ApiError:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": name, "kind": resource},
        "code": code,
    }
    return kubeclient.ApiError(code, reason, message, status)


def not_found(resource: str, name: str) -> kubeclient.ApiError:
    """404 NotFound as the API server words it."""
    return _status_error(404, "NotFound", f'{resource} "{name}" not found', resource, name)


def already_exists(resource: str, name: str) -> kubeclient.ApiError:
    """409 AlreadyExists as the API server words it."""
    return _status_error(409, "AlreadyExists", f'{resource} "{name}" already exists', resource, name)


def conflict(resource: str, name: str, why: str) -> kubeclient.ApiError:
    """409 Conflict as the API server words it (`why`: a stale resourceVersion, a uid precondition)."""
    message = f'Operation cannot be fulfilled on {resource} "{name}": {why}'
    return _status_error(409, "Conflict", message, resource, name)


STALE = "the object has been modified; please apply your changes to the latest version and try again"


@dataclass
class _Failure:
    verb: str
    path: str | None
    error: BaseException
    times: int | None


def _copy(value: Any) -> Any:
    """A JSON copy: what a body looks like once sent (structs become dicts), and never shared."""
    return None if value is None else json.loads(msgspec.json.encode(value))


def _clone(obj: Obj) -> Obj:
    copied: Obj = _copy(obj)
    return copied


class FakeClient(kubeclient.KubeClient):
    """Objects by path, recorded actions, injected errors (module docstring)."""

    def __init__(
        self,
        objects: Mapping[str, Obj] | None = None,
        *,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        write_guard: kubeclient.WriteGuard | None = None,
        resource_version: int = 0,
    ) -> None:
        """`objects` by path; `now` stamps creations and deletions; `write_guard` is called as
        `KubeClient`'s is; `resource_version` is the store's before any write or object."""
        super().__init__(kubeclient.Connection("http://fake.invalid"), qps=0)
        self.objects: dict[str, Obj] = {}
        self.actions: list[Action] = []
        self.now = now
        self.write_guard = write_guard
        self._failures: list[_Failure] = []
        self._rv = resource_version
        self._created = 0
        for path, obj in (objects or {}).items():
            self.add(path, obj)

    # --- what a test sets up and reads --------------------------------------------------------

    def add(self, path: str, obj: Obj) -> None:
        """Hold a copy of `obj` at `path` (an object's path, as `kubeclient.resource_path` builds)."""
        stored = _copy(obj)
        rv = stored.get("metadata", {}).get("resourceVersion", "")
        self._rv = max(self._rv, int(rv) if rv.isdigit() else 0)
        self.objects[path] = stored

    def fail(self, verb: str, path: str | None, error: BaseException, *, times: int | None = None) -> None:
        """Make calls of `verb` on `path` (None: any path) raise `error`, `times` times (None: always)."""
        self._failures.append(_Failure(verb, path, error, times))

    def calls(self, *verbs: str) -> list[tuple[str, str, Any]]:
        """(verb, path, body) of each action, in order; only those of `verbs` when given."""
        return [(a.verb, a.path, a.body) for a in self.actions if not verbs or a.verb in verbs]

    # --- the one place every call ends --------------------------------------------------------

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        priority: kubeclient.Priority = kubeclient.Priority.NORMAL,
    ) -> bytes:
        at = where(path)
        if method in ("GET", "DELETE"):
            listing = not at.name
            verb = (
                ("list" if listing else "get")
                if method == "GET"
                else ("delete-collection" if listing else "delete")
            )
        else:
            verb = _VERBS[method]
        decoded = json.loads(body) if isinstance(body, bytes) else _copy(body)
        if self.write_guard is not None and verb in WRITES:
            self.write_guard(method, path)  # refused: never sent, so not an action either
        action = Action(verb, path, decoded, _PATCH_TYPES.get(content_type, ""), dict(params or {}), priority)
        self.actions.append(action)
        for failure in self._failures:
            if failure.verb == verb and failure.path in (None, path) and failure.times != 0:
                if failure.times is not None:
                    failure.times -= 1
                raise failure.error
        answer = await self.handle(action)
        return b"" if answer is None else msgspec.json.encode(answer)

    async def watch_batches(self, path: str, params: Mapping[str, str]) -> AsyncIterator[list[bytes]]:
        raise NotImplementedError("FakeClient serves no watches: feed caches with kcm_shared.testing.caches")
        yield []  # an async generator, like the method it replaces

    async def handle(self, action: Action) -> Obj | None:
        """The answer to `action` from the objects held; override for other answers."""
        at = where(action.path)
        if action.verb == "list":
            return {
                "kind": "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": [_copy(o) for p, o in self.objects.items() if where(p).collection == at.collection],
            }
        if action.verb == "create":
            if at.name:
                raise NotImplementedError(
                    f"FakeClient: POST to a subresource ({action.path}): override handle"
                )
            return self._create(at, action.body)
        if action.verb == "delete-collection":
            for p in [p for p in self.objects if where(p).collection == at.collection]:
                self._delete(p, {})
            return {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        stored = self.objects.get(at.object_path)
        if stored is None:
            raise not_found(at.qualified, urllib.parse.unquote(at.name))
        if action.verb == "get":
            return _clone(stored)
        if action.verb == "delete":
            return self._delete(at.object_path, action.body or {})
        if action.verb == "update":
            new = action.body
        elif action.patch_type == "merge":
            new = jsonmerge.merge_patch(stored, action.body)
        elif action.patch_type == "strategic":
            new = patching.strategic_merge_patch(stored, action.body)
        else:
            raise NotImplementedError(
                f"FakeClient: {action.patch_type} patch of {action.path}: override handle"
            )
        return self._write(at, stored, new, action.body)

    # --- the API server's bookkeeping ---------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _timestamp(self) -> str:
        return self.now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _create(self, at: Where, body: Obj) -> Obj:
        obj = _copy(body)
        meta = obj.setdefault("metadata", {})
        self._created += 1
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', '')}{self._created}"
        path = f"{at.collection}/{urllib.parse.quote(meta['name'], safe='')}"
        if path in self.objects:
            raise already_exists(at.qualified, meta["name"])
        if "/namespaces/" in at.collection:
            meta["namespace"] = at.collection.split("/namespaces/", 1)[1].split("/", 1)[0]
        meta.update(uid=f"uid-{self._created}", resourceVersion=self._next_rv(), generation=1)
        meta.setdefault("creationTimestamp", self._timestamp())
        self.objects[path] = obj
        return _clone(obj)

    def _write(self, at: Where, stored: Obj, new: Obj, body: Any) -> Obj:
        sent = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        meta = stored.get("metadata", {})
        name = meta.get("name", "")
        if sent.get("uid") and sent["uid"] != meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {sent['uid']}, UID in object meta: {meta.get('uid', '')}"
            raise conflict(at.qualified, name, why)
        if sent.get("resourceVersion") and sent["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(at.qualified, name, STALE)
        if at.subresource == "status":
            new = {**stored, "status": _copy(new.get("status"))} if "status" in new else _copy(stored)
        elif at.subresource == "finalize":
            new = _copy(stored)
            new.setdefault("spec", {})["finalizers"] = (body.get("spec") or {}).get("finalizers", [])
        else:
            new = _copy(new)
        kept = {
            k: meta[k] for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp") if k in meta
        }
        new["metadata"] = {**new.get("metadata", {}), **kept, "resourceVersion": self._next_rv()}
        if "generation" in meta and _spec(new) != _spec(stored):
            new["metadata"]["generation"] = meta["generation"] + 1
        self.objects[at.object_path] = new
        return _clone(new)

    def _delete(self, path: str, options: Obj) -> Obj:
        stored = self.objects[path]
        meta = stored.setdefault("metadata", {})
        pre = options.get("preconditions") or {}
        for key, why in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(key) and pre[key] != meta.get(key):
                at = where(path)
                message = f"Precondition failed: {why} in precondition: {pre[key]}, {why} in object meta: {meta.get(key, '')}"
                raise conflict(at.qualified, at.name, message)
        if meta.get("finalizers"):
            meta.setdefault("deletionTimestamp", self._timestamp())
            meta["resourceVersion"] = self._next_rv()
        else:
            del self.objects[path]
        return _clone(stored)


def _spec(obj: Obj) -> Obj:
    """What a generation counts: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
