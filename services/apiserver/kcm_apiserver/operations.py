"""The verbs of the API (get, list, create, update, patch, delete) over the store.

This is where upstream's generic registry lives: metadata bookkeeping (uid, generation,
resourceVersion checks, timestamps), defaulting, validation, namespace lifecycle rules,
finalizers and propagation policies, dry runs, and version conversion between what a
client speaks and what is stored. The HTTP layer (`server`) parses requests and calls in;
subresources with their own logic live in `subresources`.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcm_shared.apimachinery import codec, jsonmerge, selectors
from kcm_shared.apimachinery.jsonmerge import deep_copy

from kcm_apiserver import (
    apply,
    bootstrappolicy,
    certificates,
    conversion,
    crds,
    defaults,
    errors,
    fieldsel,
    limitranger,
    localapiservices,
    nodeports,
    patch,
    quota,
    saadmission,
    storageadmission,
    strategies,
    validation,
)
from kcm_apiserver.registry import Registry, ResourceType, storage_key_of
from kcm_apiserver.schemas import patchtypes, unknownfields, zerovalues
from kcm_apiserver.store import Obj, Store
from kcm_apiserver.validation import fielderrors

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Upstream's NamespaceLifecycle admission refuses to delete these (kube-node-lease may go).
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
_IGNORED_ON_UPDATE = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
# Upstream's ObjectMeta lists are `omitempty`: an empty one is not stored, so a client that
# removed the last finalizer (or owner) reads the field as absent, never as [].
_OMITTED_WHEN_EMPTY = ("finalizers", "ownerReferences")


def _drop_empty_lists(meta: Obj) -> None:
    for key in _OMITTED_WHEN_EMPTY:
        if meta.get(key) == []:
            del meta[key]


# Upstream's generated names: no vowels (no words by chance), no look-alike characters.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LENGTH = 5
_MAX_GENERATED_BASE = 63 - _SUFFIX_LENGTH
_GENERATE_NAME_ATTEMPTS = 8


_KUBERNETES_SERVICE: Obj = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
    "spec": {
        "clusterIP": "10.96.0.1",
        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
        "sessionAffinity": "None",
        "type": "ClusterIP",
    },
}


def now_rfc3339() -> str:
    return _second_rfc3339(int(time.time()))


@functools.lru_cache(maxsize=2)
def _second_rfc3339(second: int) -> str:
    # Every write stamps managedFields: strftime on each was 1.5% of the server's CPU.
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


@dataclass
class Ctx:
    """What a single request asks for beyond its body."""

    rt: ResourceType
    namespace: str = ""
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Ignore"
    user_agent: str = ""
    warnings: list[str] = field(default_factory=list)
    # Called with (kind, object, the stored one or None) before a create or update of the main
    # resource is stored: the admission a request's user must pass (RBAC escalation checks).
    admit: Callable[[str, Obj, Obj | None], None] | None = None
    # The authenticated user (username, uid, groups, extra), for what a strategy records of it.
    requester: dict[str, Any] | None = None

    @property
    def manager(self) -> str:
        # Upstream names the manager after the client's user agent program when none is given.
        return self.field_manager or (self.user_agent.split("/")[0] if self.user_agent else "unknown")


@dataclass
class ListResult:
    items: list[Obj]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None


class Api:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Callable[[], str] = now_rfc3339,
        node_port_range: nodeports.PortRange | None = None,
        toleration_seconds: strategies.TolerationSeconds = strategies.DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self.store = store
        self.toleration_seconds = toleration_seconds
        self.registry = registry
        self.clock = clock
        self.ips = strategies.ClusterIPAllocator()
        self.node_ports = nodeports.NodePortAllocator(node_port_range)
        self.crds = crds.CrdRegistrar(registry)
        for svc in store.list(storage_key_of(self._rt("", "v1", "services")), None):
            ip = svc.get("spec", {}).get("clusterIP")
            if ip and ip != "None":
                self.ips.mark_used(ip)
            self.node_ports.mark_used(svc)
        crd_rt = self._rt("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in store.list(storage_key_of(crd_rt), None):
            self.crds.register(crd)
        ns_rt = self._rt("", "v1", "namespaces")
        for name in SYSTEM_NAMESPACES:
            if store.get(storage_key_of(ns_rt), "", name) is None:
                self.create(Ctx(ns_rt), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        svc_rt = self._rt("", "v1", "services")
        if store.get(storage_key_of(svc_rt), "default", "kubernetes") is None:
            # Upstream's apiserver publishes itself as default/kubernetes on the first service IP.
            self.create(Ctx(svc_rt, "default"), _KUBERNETES_SERVICE)
        for bootstrap in bootstrappolicy.objects():
            rt = self._rt("rbac.authorization.k8s.io", "v1", bootstrap["kind"].lower() + "s")
            if store.get(storage_key_of(rt), "", bootstrap["metadata"]["name"]) is None:
                self.create(Ctx(rt, field_manager="kube-apiserver"), bootstrap)
        apiservice_rt = self._rt("apiregistration.k8s.io", "v1", "apiservices")
        for apiservice in localapiservices.local_apiservices(registry):
            name = apiservice["metadata"]["name"]
            if store.get(storage_key_of(apiservice_rt), "", name) is None:
                created = self.create(Ctx(apiservice_rt, field_manager="kube-apiserver"), apiservice)
                created["status"] = localapiservices.available_status(self.clock())
                self.update(Ctx(apiservice_rt, field_manager="kube-apiserver"), name, created, "status")

    def _rt(self, group: str, version: str, resource: str) -> ResourceType:
        rt = self.registry.lookup(group, version, resource)
        assert rt is not None, f"{group}/{version}/{resource} is built in"
        return rt

    # -- conversion between the served and the stored version ----------------------------------

    def to_served(self, rt: ResourceType, stored: Obj) -> Obj:
        if rt.group == "events.k8s.io":
            return conversion.core_event_to_events_v1(stored)
        if rt.stored_version != rt.version:
            return conversion.convert(stored, rt.group, rt.kind, rt.stored_version, rt.version)
        return stored

    def to_stored(self, rt: ResourceType, served: Obj) -> Obj:
        if rt.group == "events.k8s.io":
            return conversion.events_v1_to_core_event(served)
        if rt.stored_version != rt.version:
            return conversion.convert(served, rt.group, rt.kind, rt.version, rt.stored_version)
        return served

    def _stored_rt(self, rt: ResourceType) -> ResourceType:
        """The resource type objects are stored as (core Events for events.k8s.io)."""
        if rt.group == "events.k8s.io":
            return self._rt("", "v1", "events")
        if rt.stored_version != rt.version:
            stored = self.registry.lookup(rt.group, rt.stored_version, rt.resource)
            if stored is not None:
                return stored
        return rt

    # -- reads ----------------------------------------------------------------------------------

    def get_stored(self, ctx: Ctx, name: str) -> Obj:
        obj = self.store.get(storage_key_of(ctx.rt), ctx.namespace, name)
        if obj is None:
            raise errors.not_found(ctx.rt.group, ctx.rt.resource, name)
        return obj

    def get(self, ctx: Ctx, name: str) -> Obj:
        return self.to_served(ctx.rt, self.get_stored(ctx, name))

    def predicate(
        self, rt: ResourceType, label_selector: str, field_selector: str
    ) -> Callable[[Obj], bool] | None:
        """A filter over stored objects for `?labelSelector=&fieldSelector=`; None matches all."""
        try:
            labels = selectors.parse_label_selector(label_selector or "")
            fields = selectors.parse_field_selector(field_selector or "")
        except selectors.SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        fieldsel.check(rt.group, rt.kind, fields)
        if labels.empty and fields.empty:
            return None
        group, kind = rt.group, rt.kind

        def match(obj: Obj) -> bool:
            if not labels.empty and not labels.matches(obj.get("metadata", {}).get("labels") or {}):
                return False
            return fields.empty or fields.matches(fieldsel.field_labels(group, kind, obj))

        return match

    def list_objects(
        self,
        ctx: Ctx,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> ListResult:
        match = self.predicate(ctx.rt, label_selector, field_selector)
        key = storage_key_of(ctx.rt)
        namespace = ctx.namespace if ctx.rt.namespaced and ctx.namespace else None
        objs = self.store.list(key, namespace)
        rv = self.store.rv
        if continue_token:
            rv, start = self._decode_continue(key, continue_token)
            objs = [o for o in objs if _sort_key(o) > start]
        if match is not None:
            objs = [o for o in objs if match(o)]
        result = ListResult(objs, str(rv))
        if limit and len(objs) > limit:
            result.items = objs[:limit]
            result.remaining = len(objs) - limit
            result.continue_token = _encode_continue(rv, _sort_key(objs[limit - 1]))
        return result

    def _decode_continue(self, key: str, token: str) -> tuple[int, tuple[str, str]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv, start = int(data["rv"]), tuple(data["start"].split("/", 1))
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.bad_request(f"continue key is not valid: {exc}") from exc
        if not self.store.resumable(key, rv):
            raise errors.gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return rv, (start[0], start[1]) if len(start) == 2 else ("", start[0])

    # -- writes ---------------------------------------------------------------------------------

    def _check_namespace(self, ctx: Ctx, meta: Obj) -> None:
        """Upstream's NamespaceLifecycle admission for a create: the namespace must exist and
        must not be terminating."""
        if not ctx.rt.namespaced:
            return
        if not ctx.namespace:
            raise errors.bad_request(
                "the server could not find the requested resource: namespace is required"
            )
        ns = self.store.get("/namespaces", "", ctx.namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", ctx.namespace)
        if (ns.get("status") or {}).get("phase") == "Terminating":
            # The cause lets controllers tell this refusal from others (upstream's lifecycle
            # admission); the name is the object's, or its generateName before one is made.
            raise errors.forbidden(
                ctx.rt.group,
                ctx.rt.resource,
                meta.get("name") or meta.get("generateName") or "Unknown",
                f"unable to create new content in namespace {ctx.namespace} because it is being terminated",
                [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {ctx.namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            )

    def _decode_body(
        self, ctx: Ctx, body: Any, *, patch: bool = False, owned: bool = False, patched: Obj | None = None
    ) -> Obj:
        """The body as an object of the target kind; `patch` when it is the result of a patch,
        `owned` when nothing else holds it (a patch's result is a fresh copy), so it is used
        as is: copying a pod with its managedFields cost more than the rest of a status patch.
        `patched` is the object a patch was applied to: only what the patch changed is checked
        for unknown fields, as upstream reports only those a patch brings."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        rt = ctx.rt
        if kind is not None and kind != rt.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.group_version})"
                if api_version != rt.group_version
                else f'kind "{kind}" does not match the kind of the resource ({rt.kind})'
            )
        if api_version is not None and api_version != rt.group_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.group_version})"
            )
        if not isinstance(body.get("metadata", {}), dict):
            raise errors.bad_request("metadata must be an object")
        obj = body if owned else deep_copy(body)
        self._check_fields(ctx, obj, patch, patched)
        obj["apiVersion"], obj["kind"] = rt.group_version, rt.kind
        obj.setdefault("metadata", {})
        return obj

    def _check_fields(self, ctx: Ctx, body: Obj, patch: bool, patched: Obj | None) -> None:
        """Strict refuses a body with unknown fields; Warn and Ignore drop them (with a
        warning each for Warn), as upstream stores only the fields its types know."""
        rt = ctx.rt
        unknown = unknownfields.unknown_fields(
            self.registry,
            rt.group,
            rt.version,
            rt.kind,
            body,
            self.crds.crds(),
            unchanged=patched,
            drop=ctx.field_validation != "Strict",
        )
        if not unknown or ctx.field_validation == "Ignore":
            return
        # Go's strict decoder quotes each path with %q.
        problems = [f"unknown field {fielderrors.go_quote(p.lstrip('.'))}" for p in unknown]
        if ctx.field_validation == "Warn":
            ctx.warnings.extend(problems)
            return
        message = "strict decoding error: " + ", ".join(problems)
        if not patch:
            # Upstream's create and update handlers wrap decoding errors with the kind (transformDecodeError).
            kind, version = ctx.rt.kind, ctx.rt.version
            message = f'{kind} in version "{version}" cannot be handled as a {kind}: {message}'
        raise errors.bad_request(message)

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str = "") -> None:
        causes = validation.validate(rt.group, rt.kind, obj, old, subresource)
        if causes:
            name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
            raise errors.invalid(rt.group, rt.kind, name, causes)

    def _type_info(self, rt: ResourceType) -> Any:
        return patchtypes.type_info(self.registry, rt.group, rt.version, rt.kind, self.crds.crds())

    def _generated_name(self, rt: ResourceType, namespace: str, base: str) -> str:
        """`base` (cut to leave room for the suffix) plus a random suffix no object has yet.

        Upstream's name generator and its retries on a taken name (RetryGenerateName, GA in
        1.31): with only 27^5 suffixes, thousands of pods of one ReplicaSet would otherwise
        meet a collision, which their controller would see as a failed create.
        """
        base = base[:_MAX_GENERATED_BASE]
        key, ns = storage_key_of(rt), namespace if rt.namespaced else ""
        for _ in range(_GENERATE_NAME_ATTEMPTS):
            name = base + "".join(random.choices(_SUFFIX_ALPHABET, k=_SUFFIX_LENGTH))
            if self.store.get(key, ns, name) is None:
                break
        return name

    def create(self, ctx: Ctx, body: Any, managed: list[Obj] | None = None) -> Obj:
        rt = ctx.rt
        served = self._decode_body(ctx, body)
        meta = served["metadata"]
        if rt.namespaced:
            ns = meta.get("namespace") or ctx.namespace
            if ctx.namespace and ns != ctx.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            ctx.namespace = ns
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        self._check_namespace(ctx, meta)
        asked_for = str(meta.get("name") or meta.get("generateName") or "")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generated_name(rt, ctx.namespace, meta["generateName"])
        if not meta.get("name"):
            raise errors.invalid(
                rt.group,
                rt.kind,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                        "field": "metadata.name",
                    }
                ],
            )
        for name in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(name, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.clock()
        srt = self._stored_rt(rt)
        obj = self.to_stored(rt, served)
        _drop_empty_lists(obj["metadata"])
        defaults.apply_defaults(srt.group, srt.kind, obj)
        storageadmission.admit_create(self.store, srt, obj)
        limitranger.admit_create(self.store, srt, obj)
        saadmission.admit_create(self.store, srt, obj, asked_for)
        strategies.prepare_for_create(srt, obj, self.ips, self.toleration_seconds)
        if (srt.group, srt.kind) == (certificates.GROUP, certificates.KIND):
            certificates.prepare_create(obj, ctx.requester)
        self._validate(srt, obj, None)
        limitranger.validate(self.store, srt, obj, None)
        if ctx.admit is not None:
            ctx.admit(srt.kind, obj, None)
        ctx.warnings.extend(strategies.warnings_on_create(srt, obj))
        if srt.model:
            zerovalues.fill(srt.model, obj)
        charges = quota.admit(self.store, srt, ctx.namespace, obj)
        if self.store.get(storage_key_of(rt), ctx.namespace if rt.namespaced else "", meta["name"]):
            if not ctx.dry_run:
                strategies.release(srt, obj, self.ips)
            raise errors.already_exists(rt.group, rt.resource, meta["name"])
        taken = self._assign_node_ports(srt, obj, None)
        self._own_fields(ctx, srt, None, obj, managed)
        if ctx.dry_run:
            strategies.release(srt, obj, self.ips)
            self.node_ports.release(taken)
            # Never stored, so no version: upstream omits the empty field (`kubectl diff` shows it).
            obj["metadata"].pop("resourceVersion", None)
            return self.to_served(rt, obj)
        self.store.put(storage_key_of(rt), obj)
        self._after_write(srt, None, obj)
        self._charge_quotas(charges)
        return self.to_served(rt, obj)

    def update(self, ctx: Ctx, name: str, body: Any, subresource: str = "") -> Obj:
        rt = ctx.rt
        served = self._decode_body(ctx, body)
        meta = served["metadata"]
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace", ctx.namespace) != ctx.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        old = self.get_stored(ctx, name)
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(
                rt.group,
                rt.resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        return self._write_update(ctx, old, self.to_stored(rt, served), subresource)

    def track_fields(self, ctx: Ctx, obj: Obj) -> None:
        """Give an object the managedFields a create by this request records (the review
        kinds: answered, never stored, yet kube-apiserver's create handler tracks them)."""
        self._own_fields(ctx, ctx.rt, None, obj, None)

    def _own_fields(
        self,
        ctx: Ctx,
        srt: ResourceType,
        old: Obj | None,
        new: Obj,
        managed: list[Obj] | None,
        subresource: str = "",
    ) -> None:
        """Record field ownership: an apply brings its own, any other write is an Update."""
        if managed is not None:
            new["metadata"]["managedFields"] = managed
        else:
            info = self._type_info(srt)
            now = self.clock()
            apply.track_update(
                old, new, ctx.manager, info, ctx.rt.group_version, now, subresource=subresource
            )

    def _write_update(
        self, ctx: Ctx, old: Obj, new: Obj, subresource: str, managed: list[Obj] | None = None
    ) -> Obj:
        rt = ctx.rt
        srt = self._stored_rt(rt)
        meta = new.setdefault("metadata", {})
        meta["name"] = old["metadata"]["name"]
        if rt.namespaced:
            meta["namespace"] = ctx.namespace
        for key in _IGNORED_ON_UPDATE:
            if key == "uid" and meta.get("uid"):
                # A uid the client sent must be the stored one (validation answers 422 if not):
                # a write meant for an object that was deleted and re-created must not land.
                continue
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        if (srt.group, srt.kind) == (certificates.GROUP, certificates.KIND):
            certificates.prepare_update(old, new, subresource, self.clock)
        new = strategies.prepare_for_update(srt, old, new, subresource)
        meta = new["metadata"]
        _drop_empty_lists(meta)
        if subresource != "status":
            defaults.apply_defaults(srt.group, srt.kind, new)
        strategies.after_defaults_on_update(srt, old, new, subresource)
        self._validate(srt, new, old, subresource)
        storageadmission.validate_update(self.store, srt, new, old, subresource)
        if not subresource:
            limitranger.validate(self.store, srt, new, old)
            if ctx.admit is not None:
                ctx.admit(srt.kind, new, old)
            ctx.warnings.extend(strategies.warnings_on_update(srt, old, new))
        if srt.model:
            zerovalues.fill(srt.model, new)
        charges = quota.admit(self.store, srt, ctx.namespace, new, old, subresource)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        taken = self._assign_node_ports(srt, new, old) if subresource != "status" else set()
        self._own_fields(ctx, srt, old, new, managed, subresource)
        if new == old or ctx.dry_run:
            self.node_ports.release(taken)
            # Upstream skips no-op writes: the resourceVersion does not move and no event fires.
            return self.to_served(rt, old if new == old else new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and self._may_finish(srt, new):
            final = self.store.remove(
                storage_key_of(rt), ctx.namespace if rt.namespaced else "", meta["name"]
            )
            assert final is not None
            self._after_delete(srt, final)
            return self.to_served(rt, final)
        self.store.put(storage_key_of(rt), new)
        if (srt.group, srt.kind) == ("", "Service"):
            self.node_ports.release(nodeports.node_ports(old) - nodeports.node_ports(new))
        self._after_write(srt, old, new)
        self._charge_quotas(charges)
        return self.to_served(rt, new)

    def _charge_quotas(self, charges: list[tuple[Obj, dict[str, str]]]) -> None:
        """Write the usage quota admission charged, in the request that charged it."""
        quota_rt = self._rt("", "v1", "resourcequotas")
        for stored, used in charges:
            charged = deep_copy(stored)
            charged.setdefault("status", {})["used"] = used
            ctx = Ctx(quota_rt, stored["metadata"]["namespace"], field_manager=quota.FIELD_MANAGER)
            self._write_update(ctx, stored, charged, "status")

    def _may_finish(self, rt: ResourceType, obj: Obj) -> bool:
        """Whether a terminating object with no finalizers left can go now."""
        if (rt.group, rt.kind) == ("", "Namespace"):
            return not obj.get("spec", {}).get("finalizers")
        if (rt.group, rt.kind) == ("", "Pod"):
            # A graceful pod deletion is finished by its kubelet deleting again with grace 0.
            return not obj["metadata"].get("deletionGracePeriodSeconds")
        return True

    def patch(
        self, ctx: Ctx, name: str, patch_type: str, body: Any, subresource: str = "", force: bool = False
    ) -> tuple[Obj, bool]:
        """Apply a patch; returns the object and whether it was created (server-side apply)."""
        rt = ctx.rt
        stored = self.store.get(storage_key_of(rt), ctx.namespace if rt.namespaced else "", name)
        if patch_type == "apply":
            return self._server_side_apply(ctx, name, stored, body, force, subresource)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        current = self.to_served(rt, stored)
        try:
            if patch_type == "json":
                patched = patch.json_patch(current, body)
            elif patch_type == "merge":
                patched = jsonmerge.merge_patch(current, body)
            elif patch_type == "strategic":
                if rt.model is None:
                    raise errors.ApiError(
                        415,
                        "UnsupportedMediaType",
                        "strategic merge patch is not supported for custom resources",
                    )
                patched = patch.strategic_merge_patch(current, body, self._type_info(rt))
            else:
                raise errors.unsupported_media_type(patch_type)
        except patch.PatchError as exc:
            raise errors.ApiError(422, "Invalid", str(exc)) from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        # A JSON patch's paths are strings: a shallow body may nest a value deep in the object.
        if patch_type == "json" and codec.exceeds_depth(patched):
            raise errors.bad_request(f"the patch nests the object deeper than {codec.MAX_DEPTH} levels")
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != stored["metadata"]["resourceVersion"]:
            raise errors.conflict(
                rt.group,
                rt.resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        new = self._decode_body(ctx, patched, patch=True, owned=True, patched=current)
        return self._write_update(ctx, stored, self.to_stored(rt, new), subresource), False

    def _server_side_apply(
        self, ctx: Ctx, name: str, stored: Obj | None, body: Any, force: bool, subresource: str
    ) -> tuple[Obj, bool]:
        rt = ctx.rt
        if stored is None and subresource:
            # An apply to a subresource updates; it never creates the object (kube-apiserver's 404).
            raise errors.not_found(rt.group, rt.resource, name)
        applied = self._decode_body(ctx, body, patch=True)
        applied["metadata"].setdefault("name", name)
        if applied["metadata"]["name"] != name:
            raise errors.bad_request("the name of the object does not match the name on the URL")
        info = self._type_info(rt)
        live = self.to_served(rt, stored) if stored is not None else None
        try:
            merged = apply.server_side_apply(
                live,
                applied,
                ctx.field_manager,
                force,
                info,
                rt.group_version,
                self.clock(),
                subresource=subresource,
            )
        except apply.ApplyConflict as exc:
            raise exc.api_error() from exc
        except patch.PatchError as exc:
            raise errors.ApiError(422, "Invalid", str(exc)) from exc
        managed = merged["metadata"].get("managedFields") or []
        if stored is None:
            return self.create(ctx, merged, managed), True
        return self._write_update(ctx, stored, self.to_stored(rt, merged), subresource, managed), False

    # -- delete ---------------------------------------------------------------------------------

    def delete(self, ctx: Ctx, name: str, options: Obj) -> tuple[Obj, bool]:
        """Delete or start deleting; returns the object and whether it is gone already."""
        rt = ctx.rt
        srt = self._stored_rt(rt)
        is_namespace = (srt.group, srt.kind) == ("", "Namespace")
        if is_namespace and name in IMMORTAL_NAMESPACES:
            raise errors.forbidden("", "namespaces", name, "this namespace may not be deleted")
        stored = self.get_stored(ctx, name)
        meta = stored["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(
                rt.group,
                rt.resource,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise errors.conflict(
                rt.group,
                rt.resource,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.invalid(
                rt.group,
                rt.kind,
                name,
                [
                    {
                        "reason": "FieldValueNotSupported",
                        "field": "propagationPolicy",
                        "message": f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
                    }
                ],
            )
        if is_namespace and meta.get("deletionTimestamp"):
            raise errors.conflict(
                "",
                "namespaces",
                name,
                "The system is ensuring all content is removed from this namespace.  "
                "Upon completion, this namespace will automatically be purged by the system.",
            )
        new = deep_copy(stored)
        nmeta = new["metadata"]
        finalizers = _gc_finalizers(list(nmeta.get("finalizers") or []), policy, srt)
        if is_namespace:
            new.setdefault("status", {})["phase"] = "Terminating"
        grace = strategies.graceful_seconds(srt, stored, options.get("gracePeriodSeconds"))
        keeps = bool(finalizers) or grace > 0 or (is_namespace and new.get("spec", {}).get("finalizers"))
        if not keeps:
            if ctx.dry_run:
                return self.to_served(rt, stored), True
            final = self.store.remove(storage_key_of(rt), ctx.namespace if rt.namespaced else "", name)
            assert final is not None
            self._after_delete(srt, final)
            return self.to_served(rt, final), True
        if finalizers:
            nmeta["finalizers"] = finalizers
        else:
            nmeta.pop("finalizers", None)  # e.g. a Background delete dropped a GC finalizer
        if not nmeta.get("deletionTimestamp"):
            deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)
            nmeta["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
            if "generation" in nmeta:
                nmeta["generation"] += 1
        if grace > 0 or "deletionGracePeriodSeconds" in nmeta:
            current = nmeta.get("deletionGracePeriodSeconds")
            nmeta["deletionGracePeriodSeconds"] = grace if current is None else min(current, grace)
        elif finalizers:
            nmeta["deletionGracePeriodSeconds"] = 0
        if new == stored or ctx.dry_run:
            return self.to_served(rt, new), False
        self.store.put(storage_key_of(rt), new)
        self._after_write(srt, stored, new)
        return self.to_served(rt, new), False

    def delete_collection(
        self, ctx: Ctx, options: Obj, label_selector: str = "", field_selector: str = ""
    ) -> list[Obj]:
        listed = self.list_objects(ctx, label_selector, field_selector)
        out = []
        for obj in listed.items:
            meta = obj["metadata"]
            sub = Ctx(ctx.rt, meta.get("namespace", ""), ctx.dry_run, ctx.field_manager)
            try:
                out.append(self.delete(sub, meta["name"], options)[0])
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        return out

    def _after_write(self, rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if (rt.group, rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            established = self.crds.register(new)
            if established is not None and established != new:
                self.store.put(storage_key_of(rt), established)

    def _assign_node_ports(self, rt: ResourceType, svc: Obj, old: Obj | None) -> set[int]:
        if (rt.group, rt.kind) != ("", "Service"):
            return set()
        return self.node_ports.assign(svc["metadata"]["name"], svc, old)

    def _after_delete(self, rt: ResourceType, final: Obj) -> None:
        strategies.release(rt, final, self.ips)
        if (rt.group, rt.kind) == ("", "Service"):
            self.node_ports.release(nodeports.node_ports(final))
        if (rt.group, rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            self.crds.unregister(final)
            group, plural = final["spec"]["group"], final["spec"]["names"]["plural"]
            key = f"{group}/{plural}"
            for obj in list(self.store.list(key, None)):
                m = obj["metadata"]
                self.store.remove(key, m.get("namespace", ""), m["name"])


_GC_FINALIZERS = {"orphan": "Orphan", "foregroundDeletion": "Foreground"}


def _gc_finalizers(finalizers: list[str], policy: str | None, rt: ResourceType) -> list[str]:
    """The finalizers a delete leaves for the garbage collector, as upstream's registry store.

    An explicit propagation policy decides, also on an object already being deleted (a
    Foreground deletion can be turned into an Orphan one, or a Background one that lets the
    object go now); without one, a GC finalizer the object carries wins over the kind's default.
    """
    present = [f for f in finalizers if f in _GC_FINALIZERS]
    if policy is None:
        policy = _GC_FINALIZERS[present[0]] if present else strategies.default_propagation(rt)
    wanted = [f for f, p in _GC_FINALIZERS.items() if p == policy]
    if set(present) == set(wanted):
        return finalizers
    return [f for f in finalizers if f not in _GC_FINALIZERS] + wanted


def _sort_key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _encode_continue(rv: int, last: tuple[str, str]) -> str:
    data = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{last[0]}/{last[1]}"}).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
