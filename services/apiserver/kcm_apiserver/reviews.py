"""The review kinds: answered from the request, never stored.

- authentication.k8s.io/v1 TokenReview (pkg/registry/authentication/tokenreview: the token
  checked by `authn.Authenticator.review` against spec.audiences or --api-audiences) and
  SelfSubjectReview (`kubectl auth whoami`).
- authorization.k8s.io/v1 SubjectAccessReview, LocalSubjectAccessReview,
  SelfSubjectAccessReview (`kubectl auth can-i`) and SelfSubjectRulesReview (`kubectl auth
  can-i --list`), answered by `authz.Authorizer` with upstream's validation messages
  (pkg/apis/authorization/validation) and Bad Request texts (pkg/registry/authorization/*).
- TokenReview and the subject access reviews echo the body as sent, with managedFields as a
  create records them and `metadata.creationTimestamp: null` (Go's unset time), the status
  filled in; the self reviews answer with a new object holding only the status, as upstream.

Caller: `server.Server._resource` for the resources of `GROUPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcm_apiserver import authn, authz, errors
from kcm_apiserver.operations import Ctx
from kcm_apiserver.rbac import Attributes
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.validation.fielderrors import Causes, GoText, as_dict, as_list, go_quote

Obj = dict[str, Any]
AUTHORIZATION = "authorization.k8s.io"
GROUPS = frozenset({"authentication.k8s.io", AUTHORIZATION})


def answer(
    ctx: Ctx,
    body: Any,
    user: authn.User,
    authenticator: authn.Authenticator,
    authorizer: authz.Authorizer,
    track: Callable[[Ctx, Obj], None],
) -> Obj:
    """The created review of kind `ctx.rt.kind`; `track` records its managedFields as a
    create of what was sent (before the status is filled in)."""
    rt, namespace = ctx.rt, ctx.namespace
    review = _decoded(rt, body)
    # The self reviews answer with a new object: only the status, no spec, no managedFields.
    fresh: Obj = {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": {"creationTimestamp": None}}
    if rt.kind == "SelfSubjectReview":
        return {**fresh, "status": {"userInfo": _user_info(user)}}
    if rt.kind == "SelfSubjectRulesReview":
        return {**fresh, "spec": {}, "status": _rules_status(review, user, authorizer)}
    if rt.kind == "LocalSubjectAccessReview" and not review["metadata"].get("namespace"):
        review["metadata"]["namespace"] = namespace
    track(ctx, review)
    if rt.kind == "TokenReview":
        review["status"] = _token_status(review, authenticator)
    else:
        review["status"] = _access_status(rt.kind, namespace, review, user, authorizer)
    return review


def _decoded(rt: ResourceType, body: Any) -> Obj:
    """A copy of the sent review: type, metadata and spec (a sent status is replaced)."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of the request could not be decoded: expected a {rt.kind} object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind or rt.kind) != rt.kind or (api_version or rt.group_version) != rt.group_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rt.group_version})"
            if api_version != rt.group_version
            else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    review: Obj = {"kind": rt.kind, "apiVersion": rt.group_version}
    meta = dict(as_dict(body.get("metadata")))
    meta.setdefault("creationTimestamp", None)
    review["metadata"] = meta
    review["spec"] = as_dict(body.get("spec"))
    return review


def _user_info(user: authn.User) -> Obj:
    info: Obj = {"username": user.username}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra}
    return info


# -- TokenReview ------------------------------------------------------------------------------------


def _token_status(review: Obj, authenticator: authn.Authenticator) -> Obj:
    spec = review["spec"]
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    audiences = [a for a in as_list(spec.get("audiences")) if isinstance(a, str)]
    verdict = authenticator.review(token, audiences)
    status: Obj = {}
    if verdict.user is not None:
        status["authenticated"] = True
        status["user"] = _user_info(verdict.user)
        if verdict.audiences:
            status["audiences"] = list(verdict.audiences)
    else:
        status["user"] = {}
    if verdict.error:
        status["error"] = verdict.error
    return status


# -- access reviews ---------------------------------------------------------------------------------


def _validate_spec(kind: str, review: Obj, causes: Causes) -> None:
    spec = review["spec"]
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        causes.invalid(
            "spec.nonResourceAttributes",
            _non_resource_value(non_resource),
            "cannot be specified in combination with resourceAttributes",
        )
    if resource is None and non_resource is None:
        causes.invalid(
            "spec.resourceAttributes",
            "null",  # a nil pointer: upstream prints the quoted string
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if kind != "SelfSubjectAccessReview" and not spec.get("user") and not spec.get("groups"):
        causes.invalid(
            "spec.user", str(spec.get("user") or ""), "at least one of user or group must be specified"
        )


def _non_resource_value(value: Any) -> Any:
    """The nonResourceAttributes as upstream's field error prints the Go struct (%#v)."""
    attrs = as_dict(value)
    fields = ", ".join(f"{k.capitalize()}:{go_quote(_text(attrs, k))}" for k in ("path", "verb"))
    return GoText(f"authorization.NonResourceAttributes{{{fields}}}")


def _validate(kind: str, namespace: str, review: Obj) -> None:
    causes = Causes()
    _validate_spec(kind, review, causes)
    meta = {
        k: v
        for k, v in review["metadata"].items()
        if k not in ("managedFields", "creationTimestamp") and v not in (None, "", {}, [])
    }
    spec = review["spec"]
    if kind == "LocalSubjectAccessReview":
        meta.pop("namespace", None)
        if meta:
            causes.invalid_omitted("metadata", "must be empty except for namespace")
        resource = spec.get("resourceAttributes")
        if isinstance(resource, dict) and resource.get("namespace", "") != namespace:
            causes.invalid(
                "spec.resourceAttributes.namespace",
                str(resource.get("namespace", "")),
                "must match metadata.namespace",
            )
        if spec.get("nonResourceAttributes") is not None:
            causes.invalid(
                "spec.nonResourceAttributes",
                _non_resource_value(spec["nonResourceAttributes"]),
                "disallowed on this kind of request",
            )
    elif meta:
        causes.invalid_omitted("metadata", "must be empty")
    if causes:
        # Upstream names the kind of its internal object, which is empty: `.authorization.k8s.io ""`.
        invalid = errors.invalid(AUTHORIZATION, "", "", causes)
        invalid.details = {"group": AUTHORIZATION, "causes": [dict(c) for c in causes]}
        raise invalid


def _attributes(spec: Obj, user: str, groups: tuple[str, ...]) -> Attributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            user,
            groups,
            _text(resource, "verb"),
            True,
            _text(resource, "namespace"),
            _text(resource, "group"),
            _text(resource, "resource"),
            _text(resource, "subresource"),
            _text(resource, "name"),
        )
    non_resource = as_dict(spec.get("nonResourceAttributes"))
    return Attributes(user, groups, _text(non_resource, "verb"), False, path=_text(non_resource, "path"))


def _text(obj: Obj, key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _access_status(
    kind: str, namespace: str, review: Obj, requester: authn.User, authorizer: authz.Authorizer
) -> Obj:
    # A LocalSubjectAccessReview's path names its namespace (`answer` set an unset one).
    if kind == "LocalSubjectAccessReview" and review["metadata"].get("namespace") != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    _validate(kind, namespace, review)
    spec = review["spec"]
    if kind == "SelfSubjectAccessReview":
        who, groups = requester.username, requester.groups
    else:
        who = _text(spec, "user")
        groups = tuple(g for g in as_list(spec.get("groups")) if isinstance(g, str))
    allowed, denied, reason = authorizer.authorize(_attributes(spec, who, groups))
    status: Obj = {"allowed": allowed}
    if denied:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return status


def _rules_status(review: Obj, user: authn.User, authorizer: authz.Authorizer) -> Obj:
    namespace = _text(review["spec"], "namespace")
    if not namespace:
        raise errors.bad_request("no namespace on request")
    rules = authorizer.rules_for(user, namespace)
    status: Obj = {
        "resourceRules": rules.resource,
        "nonResourceRules": rules.non_resource,
        "incomplete": rules.incomplete,
    }
    if rules.error:
        status["evaluationError"] = rules.error
    return status
