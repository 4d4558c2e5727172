"""Authorization of every request: the modes of --authorization-mode, impersonation, 403s.

- `attributes_of` reads a request as upstream's RequestInfoFactory does (verb from the method,
  `list`/`watch`/`deletecollection` without a name, a list's `metadata.name` field selector as
  its name, `/api*` paths outside a resource as non-resource requests).
- `Authorizer` answers with kube-apiserver's chain: `system:masters` is allowed everything,
  then each mode in the flag's order (`AlwaysAllow`, `AlwaysDeny`, `RBAC`); the first allow
  wins. `rules_for` is SelfSubjectRulesReview's resolver.
- `forbidden` is the 403 Status body kube-apiserver writes (responsewriters.Forbidden).
- `impersonate` is upstream's impersonation filter: `Impersonate-User`, `-Group`, `-Uid` and
  `Impersonate-Extra-*`, each checked as verb `impersonate`, the acting user swapped in after.

Callers: `server.Server.handle` (every request), `reviews` (access reviews), `escalation`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from multidict import CIMultiDictProxy

from kcm_apiserver import errors, rbac
from kcm_apiserver.authn import User
from kcm_apiserver.rbac import Attributes, Rule

MODES = ("AlwaysAllow", "AlwaysDeny", "RBAC")
PRIVILEGED_GROUP = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
# A DNS-1123 label (namespaces) and subdomain (service account names), upstream's checks in
# SplitUsername: anything else impersonates a plain user of that name.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def parse_modes(value: str) -> tuple[str, ...]:
    """--authorization-mode's comma-separated list; raises ValueError as kube-apiserver refuses."""
    modes = tuple(m.strip() for m in value.split(",") if m.strip())
    if not modes:
        raise ValueError("at least one authorization-mode must be passed")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(
                f"authorization-mode {mode!r} is not a valid mode here (supported: {', '.join(MODES)})"
            )
    if len(set(modes)) != len(modes):
        raise ValueError(f"authorization-mode {value!r} has mode specified more than once")
    return modes


# -- request attributes ---------------------------------------------------------------------------


def _field_name(query: Mapping[str, str]) -> str:
    """The name a list or watch names by `fieldSelector=metadata.name=<n>` (or `==`)."""
    for term in query.get("fieldSelector", "").split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name" and not key.endswith("!"):
            value = value.strip()
            if value and value not in (".", "..") and "/" not in value and "%" not in value:
                return value
    return ""


def attributes_of(user: User, method: str, raw_path: str, query: Mapping[str, str]) -> Attributes:
    """What a request asks, as upstream's RequestInfoFactory reads it."""
    path = urllib.parse.unquote(raw_path.split("?", 1)[0])
    parts = [urllib.parse.unquote(p) for p in raw_path.split("?", 1)[0].strip("/").split("/") if p]
    non_resource = Attributes(user.username, user.groups, method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    rest = rest[1:]  # the version
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return non_resource
        verb, rest = rest[0], rest[1:]
    else:
        verb = _VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        # Any value but false or 0 asks for a watch (upstream's fallback when parsing fails).
        watching = "watch" in query and query["watch"].lower() not in ("false", "0")
        verb = "watch" if watching else "list"
        name = _field_name(query)
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        user.username, user.groups, verb, True, namespace, group, resource, subresource, name, path
    )


# -- the decision -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """SelfSubjectRulesReview's status: rules as the resolvers list them."""

    resource: list[Rule]
    non_resource: list[Rule]
    incomplete: bool
    error: str


_ALL_RULES = Rules(
    [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
    [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    False,
    "",
)


class Authorizer:
    def __init__(self, modes: Sequence[str], evaluator: rbac.Evaluator) -> None:
        self.modes = tuple(modes)
        self.evaluator = evaluator

    @property
    def always_allows(self) -> bool:
        """Whether no request is ever refused (the dev default: skip the work)."""
        return self.modes[:1] == ("AlwaysAllow",)

    def authorize(self, a: Attributes) -> tuple[bool, bool, str]:
        """(allowed, denied, reason) as kube-apiserver's union of authorizers answers."""
        if PRIVILEGED_GROUP in a.groups:
            return True, False, ""
        reasons: list[str] = []
        for mode in self.modes:
            if mode == "AlwaysAllow":
                return True, False, ""
            if mode == "AlwaysDeny":
                return False, True, "\n".join(reasons)
            allowed, reason = self.evaluator.authorize(a)
            if allowed:
                return True, False, reason
            if reason:
                reasons.append(reason)
        return False, False, "\n".join(reasons)

    def rules_for(self, user: User, namespace: str) -> Rules:
        """Upstream's union rule resolver: AlwaysAllow lists everything, RBAC the rules held."""
        resource: list[Rule] = []
        non_resource: list[Rule] = []
        problems: list[str] = []
        for mode in self.modes:
            if mode == "AlwaysAllow":
                resource += _ALL_RULES.resource
                non_resource += _ALL_RULES.non_resource
            elif mode == "RBAC":
                rules, errs = self.evaluator.rules_for(user.username, user.groups, namespace)
                for rule in rules:
                    if rule.get("resources"):
                        resource.append(_resource_rule(rule))
                    if rule.get("nonResourceURLs"):
                        non_resource.append(
                            {
                                "verbs": list(rule.get("verbs") or []),
                                "nonResourceURLs": list(rule["nonResourceURLs"]),
                            }
                        )
                if errs:
                    problems.append(rbac.aggregate(errs))
        return Rules(resource, non_resource, bool(problems), rbac.aggregate(problems) if problems else "")

    def check(self, a: Attributes) -> None:
        """Raise kube-apiserver's 403 unless the request is allowed."""
        allowed, _, reason = self.authorize(a)
        if not allowed:
            raise forbidden(a, reason)


def _resource_rule(rule: Rule) -> Rule:
    out: Rule = {"verbs": list(rule.get("verbs") or [])}
    for key in ("apiGroups", "resources", "resourceNames"):
        if rule.get(key):
            out[key] = list(rule[key])
    return out


def forbidden(a: Attributes, reason: str) -> errors.ApiError:
    """responsewriters.Forbidden's Status for a refused request."""
    if not a.resource_request:
        message = f"User {_q(a.user)} cannot {a.verb} path {_q(a.path)}"
    else:
        resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        scope = f"in the namespace {_q(a.namespace)}" if a.namespace else "at the cluster scope"
        message = f"User {_q(a.user)} cannot {a.verb} resource {_q(resource)} in API group {_q(a.api_group)} {scope}"
    if reason:
        message = f"{message}: {reason}"
    details: dict[str, str] = {}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    if a.resource:
        details["kind"] = a.resource
    if not a.resource:
        text = f"forbidden: {message}"
    else:
        qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
        text = (
            f"{qualified} {_q(a.name)} is forbidden: {message}"
            if a.name
            else f"{qualified} is forbidden: {message}"
        )
    return errors.ApiError(403, "Forbidden", text, details=details)


def _q(text: str) -> str:
    """Go's %q for the names in these messages."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- impersonation --------------------------------------------------------------------------------

_EXTRA_PREFIX = "impersonate-extra-"


def impersonate(user: User, headers: CIMultiDictProxy[str], authorizer: Authorizer) -> User:
    """The user a request acts as: itself, or whom its Impersonate-* headers name once each
    is allowed (verb `impersonate`). Raises 403 naming the first refused, 500 for groups or
    extras without a user, as upstream's filter does."""
    requested_user = headers.get("Impersonate-User", "")
    groups_asked = headers.getall("Impersonate-Group", [])
    uid = headers.get("Impersonate-Uid", "")
    extras: dict[str, list[str]] = {}
    for key, value in headers.items():
        if key.lower().startswith(_EXTRA_PREFIX):
            extra_key = urllib.parse.unquote(key[len(_EXTRA_PREFIX) :]).lower()
            extras.setdefault(extra_key, []).append(value)
    if not requested_user:
        if groups_asked or extras or uid:
            raise errors.ApiError(
                500,
                "InternalError",
                "Internal error occurred: requested impersonation without impersonating a user",
            )
        return user
    checks: list[Attributes] = []
    base = Attributes(user.username, user.groups, "impersonate")
    split = _split_service_account(requested_user)
    groups: list[str] = []
    if split is not None:
        namespace, name = split
        checks.append(_acting(base, "", "serviceaccounts", name, namespace=namespace))
        if not groups_asked:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        checks.append(_acting(base, "", "users", requested_user))
    for group in groups_asked:
        checks.append(_acting(base, "", "groups", group))
        groups.append(group)
    for key, values in extras.items():
        for value in values:
            checks.append(_acting(base, "authentication.k8s.io", "userextras", value, subresource=key))
    if uid:
        checks.append(_acting(base, "authentication.k8s.io", "uids", uid))
    for check in checks:
        allowed, _, reason = authorizer.authorize(check)
        if not allowed:
            raise forbidden(check, reason)
    if requested_user != ANONYMOUS and not groups_asked and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return User(requested_user, uid, tuple(groups), tuple((k, tuple(v)) for k, v in extras.items()))


def _acting(
    base: Attributes, group: str, resource: str, name: str, *, namespace: str = "", subresource: str = ""
) -> Attributes:
    return Attributes(
        base.user, base.groups, "impersonate", True, namespace, group, resource, subresource, name
    )


def _split_service_account(username: str) -> tuple[str, str] | None:
    if not username.startswith(rbac.SA_PREFIX):
        return None
    parts = username[len(rbac.SA_PREFIX) :].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if (
        len(namespace) > 63
        or not _LABEL.fullmatch(namespace)
        or len(name) > 253
        or not _SUBDOMAIN.fullmatch(name)
    ):
        return None
    return namespace, name
