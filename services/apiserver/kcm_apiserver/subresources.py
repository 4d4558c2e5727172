"""Subresources with logic of their own: scale, pods/binding, pods/eviction,
namespaces/finalize, certificatesigningrequests/approval and serviceaccounts/token.

`/status` is a plain update with a different strategy and lives in `operations`. The
HTTP layer calls `get` / `write` here for everything else.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from kcm_shared.apimachinery import jsonmerge, selectors
from kcm_shared.apis import satoken

from kcm_apiserver import authn, errors, patch
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import storage_key_of
from kcm_apiserver.store import Obj

_SCALABLE = {
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("", "ReplicationController"),
}


def _success(code: int = 201) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


# -- scale --------------------------------------------------------------------------------------


def _scale_selector(rt_kind: str, obj: Obj) -> str:
    spec = obj.get("spec", {})
    if rt_kind == "ReplicationController":
        return str(selectors.label_selector_from_dict({"matchLabels": spec.get("selector") or {}}))
    crd_selector = obj.get("status", {}).get("selector")
    if "selector" not in spec and isinstance(crd_selector, str):
        return crd_selector
    return str(selectors.label_selector_from_dict(spec.get("selector") or {}))


def scale_of(kind: str, obj: Obj) -> Obj:
    meta = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": obj.get("spec", {}).get("replicas", 0)},
        "status": {
            "replicas": obj.get("status", {}).get("replicas", 0),
            "selector": _scale_selector(kind, obj),
        },
    }


def _check_scalable(ctx: Ctx) -> None:
    if (ctx.rt.group, ctx.rt.kind) not in _SCALABLE and not (
        ctx.rt.model is None and "scale" in ctx.rt.subresources
    ):
        raise errors.not_found(ctx.rt.group, f"{ctx.rt.resource}/scale", "")


def get_scale(api: Api, ctx: Ctx, name: str) -> Obj:
    _check_scalable(ctx)
    return scale_of(ctx.rt.kind, api.get(ctx, name))


def write_scale(api: Api, ctx: Ctx, name: str, patch_type: str | None, body: Any) -> Obj:
    """PUT or PATCH of `/scale`: only spec.replicas reaches the parent object."""
    _check_scalable(ctx)
    current = scale_of(ctx.rt.kind, api.get(ctx, name))
    try:
        if patch_type is None:
            wanted = body
        elif patch_type == "json":
            wanted = patch.json_patch(current, body)
        else:
            wanted = jsonmerge.merge_patch(current, body)
    except patch.PatchError as exc:
        raise errors.ApiError(422, "Invalid", str(exc)) from exc
    if not isinstance(wanted, dict):
        raise errors.bad_request("the body of the request must be a Scale object")
    replicas = (wanted.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid(
            "autoscaling",
            "Scale",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.replicas",
                    "message": f"Invalid value: {replicas}: must be greater than or equal to 0",
                }
            ],
        )
    parent = copy.deepcopy(api.get(ctx, name))
    rv = (wanted.get("metadata") or {}).get("resourceVersion")
    if rv:
        parent["metadata"]["resourceVersion"] = rv
    parent.setdefault("spec", {})["replicas"] = replicas
    # Recorded as a `scale` subresource write in managedFields, as upstream's scale handler does.
    return scale_of(ctx.rt.kind, api.update(ctx, name, parent, subresource="scale"))


# -- pods/binding -------------------------------------------------------------------------------


def bind(api: Api, ctx: Ctx, name: str, body: Any) -> Obj:
    if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
        raise errors.bad_request("a Binding needs a target")
    target = body["target"]
    node = target.get("name", "")
    if target.get("kind", "Node") != "Node" or not node:
        raise errors.invalid(
            "",
            "Binding",
            name,
            [
                {"reason": "FieldValueInvalid", "field": "target", "message": "must be a Node with a name"},
            ],
        )
    pod = jsonmerge.deep_copy(api.get_stored(ctx, name))
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict("", "pods", name, "pod is being deleted, cannot be assigned to a host")
    current = pod.get("spec", {}).get("nodeName")
    if current:
        raise errors.conflict("", "pods", name, f'pod {name} is already assigned to node "{current}"')
    pod["spec"]["nodeName"] = node
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": api.clock()}
    )
    status["conditions"] = conditions
    if ctx.dry_run:
        return _success()
    api.store.put(storage_key_of(ctx.rt), pod)
    return _success()


# -- pods/eviction ------------------------------------------------------------------------------


MAX_DISRUPTED_POD_SIZE = 2000  # upstream MaxDisruptedPodSize
_VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


def _is_ready(pod: Obj) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _unhealthy_may_go(pod: Obj, pdb: Obj) -> bool:
    """A pod that is not ready may go without taking a disruption: always with
    unhealthyPodEvictionPolicy AlwaysAllow, else (IfHealthyBudget, the default) while the
    budget holds its desired healthy count."""
    if _is_ready(pod):
        return False
    if pdb.get("spec", {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    desired = status.get("desiredHealthy", 0)
    return bool(status.get("currentHealthy", 0) >= desired > 0)


def _too_many(cause: str, retry_after: int) -> errors.ApiError:
    return errors.ApiError(
        429,
        "TooManyRequests",
        _VIOLATES,
        details={"causes": [{"reason": "DisruptionBudget", "message": cause}]},
        retry_after=retry_after or None,  # upstream sends no Retry-After for 0
    )


def _check_and_decrement(pdb: Obj, pod_name: str, now: str) -> None:
    """upstream checkAndDecrement: refuse, or take one disruption and record the pod."""
    name = pdb["metadata"]["name"]
    status = pdb.setdefault("status", {})
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 0):
        raise _too_many(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        raise errors.forbidden("policy", "poddisruptionbudget", name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise errors.forbidden(
            "policy",
            "poddisruptionbudget",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many(
            f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
            f"and has {status.get('currentHealthy', 0)} currently",
            0,
        )
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        _set_insufficient(status, now)
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}


def _set_insufficient(status: Obj, now: str) -> None:
    """UpdateDisruptionAllowedCondition at zero: DisruptionAllowed False, InsufficientPods."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    new = {
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": status.get("observedGeneration", 0),
        "reason": "InsufficientPods",
        "message": "",
    }
    for cond in conditions:
        if cond.get("type") == "DisruptionAllowed":
            moved = cond.get("status") != "False"
            cond.update(new, lastTransitionTime=now if moved else cond.get("lastTransitionTime", now))
            break
    else:
        conditions.append({**new, "lastTransitionTime": now})
    status["conditions"] = conditions


def evict(api: Api, ctx: Ctx, name: str, body: Any) -> Obj:
    """Evict a pod unless a PodDisruptionBudget forbids it (429), as upstream's eviction REST."""
    pod = api.get_stored(ctx, name)
    options = (body or {}).get("deleteOptions") or {} if isinstance(body, dict) else {}
    phase = pod.get("status", {}).get("phase")
    if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed", "Pending"):
        # A pod that is finished, not started or already going away disrupts nothing.
        _mark_and_delete(api, ctx, name, options)
        return _success()
    pdb_rt = api.registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert pdb_rt is not None
    labels = pod["metadata"].get("labels") or {}
    matching = []
    for pdb in api.store.list(storage_key_of(pdb_rt), ctx.namespace):
        selector = pdb.get("spec", {}).get("selector")
        if selector is None:
            continue
        if selectors.label_selector_from_dict(selector).matches(labels):
            matching.append(pdb)
    if len(matching) > 1:
        raise errors.ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    if matching and not _unhealthy_may_go(pod, matching[0]):
        pdb = copy.deepcopy(matching[0])
        _check_and_decrement(pdb, name, api.clock())
        if not ctx.dry_run:
            # One write takes the disruption and names the pod, so the disruption controller
            # does not count it healthy while its deletion is under way (upstream's comment).
            api.store.put(storage_key_of(pdb_rt), pdb)
    _mark_and_delete(api, ctx, name, options)
    return _success()


def _mark_and_delete(api: Api, ctx: Ctx, name: str, options: Obj) -> None:
    """Delete an evicted pod after a status write gives it DisruptionTarget=True (upstream's
    addConditionAndDeletePod, PodDisruptionConditions being GA), so whoever sees it terminate,
    the Job controller's podFailurePolicy among them, knows it was evicted. The delete's
    preconditions are checked against the pod before that write and a resourceVersion one is
    moved to the version it made, as upstream."""
    if not ctx.dry_run:
        pod = jsonmerge.deep_copy(api.get_stored(ctx, name))
        meta = pod["metadata"]
        pre = dict(options.get("preconditions") or {})
        for field, what, since in (
            ("uid", "UID", "deleted and then recreated"),
            ("resourceVersion", "ResourceVersion", "modified"),
        ):
            if pre.get(field) and pre[field] != meta.get(field):
                raise errors.conflict(
                    "",
                    "Pod",
                    name,
                    f"the {what} in the precondition ({pre[field]}) does not match the {what} in record "
                    f"({meta.get(field)}). The object might have been {since}",
                )
        _set_disruption_target(pod.setdefault("status", {}), api.clock())
        written = api.update(ctx, name, pod, subresource="status")
        if pre.get("resourceVersion"):
            pre["resourceVersion"] = written["metadata"]["resourceVersion"]
            options = {**options, "preconditions": pre}
    api.delete(ctx, name, options)


def _set_disruption_target(status: Obj, now: str) -> None:
    """upstream podutil.UpdatePodCondition with the eviction's condition: the transition time
    moves only when the status does."""
    new = {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    conditions = [dict(c) for c in status.get("conditions") or []]
    for cond in conditions:
        if cond.get("type") == "DisruptionTarget":
            if cond.get("status") == "True":
                new["lastTransitionTime"] = cond.get("lastTransitionTime", now)
            cond.clear()
            cond.update(new)
            break
    else:
        conditions.append(new)
    status["conditions"] = conditions


# -- namespaces/finalize and CSR approval -------------------------------------------------------


def finalize_namespace(api: Api, ctx: Ctx, name: str, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a Namespace")
    ns = jsonmerge.deep_copy(api.get_stored(ctx, name))
    ns.setdefault("spec", {})["finalizers"] = list((body.get("spec") or {}).get("finalizers") or [])
    rv = (body.get("metadata") or {}).get("resourceVersion")
    if rv:
        ns["metadata"]["resourceVersion"] = rv
    return api.update(ctx, name, ns, subresource="finalize")


def approve_csr(api: Api, ctx: Ctx, name: str, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a CertificateSigningRequest")
    csr = jsonmerge.deep_copy(api.get_stored(ctx, name))
    csr.setdefault("status", {})["conditions"] = (body.get("status") or {}).get("conditions") or []
    rv = (body.get("metadata") or {}).get("resourceVersion")
    if rv:
        csr["metadata"]["resourceVersion"] = rv
    return api.update(ctx, name, csr, subresource="approval")


# -- serviceaccounts/token ----------------------------------------------------------------------

MIN_EXPIRATION_SECONDS = 600  # upstream: "may not specify a duration less than 10 minutes"
MAX_EXPIRATION_SECONDS = 1 << 32


def request_token(api: Api, ctx: Ctx, name: str, body: Any, tokens: authn.ServiceAccountTokens | None) -> Obj:
    """Issue a bound token for a service account, signed with --service-account-signing-key-file
    (upstream pkg/registry/core/serviceaccount/storage/token.go): audiences default to the API
    audiences, expiry to an hour; bound to a Pod or Secret when the request names one."""
    if tokens is None or tokens.signer is None:
        # kube-apiserver installs this subresource only with a signing key and an issuer.
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    sa = api.get_stored(ctx, name)
    spec = dict((body or {}).get("spec") or {}) if isinstance(body, dict) else {}
    seconds = spec.get("expirationSeconds") or 3600
    if not isinstance(seconds, int) or seconds < MIN_EXPIRATION_SECONDS or seconds > MAX_EXPIRATION_SECONDS:
        detail = (
            "may not specify a duration less than 10 minutes"
            if not isinstance(seconds, int) or seconds < MIN_EXPIRATION_SECONDS
            else "may not specify a duration larger than 2^32 seconds"
        )
        raise errors.invalid(
            "authentication.k8s.io",
            "TokenRequest",
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.expirationSeconds",
                    "message": f"Invalid value: {seconds}: {detail}",
                }
            ],
        )
    audiences = [str(a) for a in spec.get("audiences") or ()] or list(tokens.audiences)
    pod = secret = node = None
    ref = spec.get("boundObjectRef")
    if isinstance(ref, dict) and ref:
        pod, secret, node = _bound_object(api, ctx, name, ref)
    now = tokens.now()
    claims = satoken.bound_claims(
        ctx.namespace,
        name,
        sa["metadata"]["uid"],
        audiences=audiences,
        expiration_seconds=seconds,
        now=now,
        secret=secret,
        pod=pod,
        node=node,
    )
    expires = dt.datetime.fromtimestamp(claims["exp"], dt.UTC)
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ctx.namespace, "creationTimestamp": None},
        "spec": {**spec, "expirationSeconds": seconds, "audiences": audiences},
        "status": {
            "token": tokens.signer.sign(claims),
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }


Ref = tuple[str, str]  # (name, uid) of an object a token is bound to


def _bound_object(api: Api, ctx: Ctx, sa_name: str, ref: Obj) -> tuple[Ref | None, Ref | None, Ref | None]:
    """(pod, secret, pod's node) for a boundObjectRef, checked as upstream's TokenREST."""
    api_version, kind, ref_name = (
        str(ref.get("apiVersion", "")),
        str(ref.get("kind", "")),
        str(ref.get("name", "")),
    )
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if group or kind not in ("Pod", "Secret"):
        version = api_version.rpartition("/")[2]
        raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    rt = api.registry.lookup("", "v1", "pods" if kind == "Pod" else "secrets")
    assert rt is not None
    obj = api.get_stored(Ctx(rt, ctx.namespace), ref_name)
    if kind == "Pod":
        running_as = (obj.get("spec") or {}).get("serviceAccountName", "")
        if running_as != sa_name:
            raise errors.bad_request(
                f'cannot bind token for serviceaccount "{sa_name}" to pod running with serviceaccount "{running_as}"'
            )
    uid = obj["metadata"]["uid"]
    if ref.get("uid") and ref["uid"] != uid:
        raise errors.conflict(
            "",
            kind,
            ref_name,
            f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record ({uid}). "
            "The object might have been deleted and then recreated",
        )
    if kind == "Secret":
        return None, (ref_name, uid), None
    node = None
    node_name = (obj.get("spec") or {}).get("nodeName")
    nodes_rt = api.registry.lookup("", "v1", "nodes")
    if node_name and nodes_rt is not None:
        found = api.store.get(storage_key_of(nodes_rt), "", node_name)
        if found is not None:
            node = (node_name, found["metadata"]["uid"])
    return (ref_name, uid), None, node
