"""RBAC's escalation prevention on writes of roles and bindings (pkg/registry/rbac/*/policybased).

- A Role or ClusterRole may be written by a member of `system:masters`, by a user allowed
  `escalate` on it, or by one who already holds every rule it grants (`covers`); a
  ClusterRole's aggregationRule needs full authority (`*` on everything).
- A RoleBinding or ClusterRoleBinding may be written by a member of `system:masters`, by a
  user allowed `bind` on the role it refers to, or by one who holds every rule of that role.
- An update changing only owner references and finalizers (the garbage collector's) is not
  checked, as upstream's IsOnlyMutatingGCFields.
- Refusals are 403s with upstream's message: the rules not held, compacted and listed as
  rbacv1helpers.CompactString prints them.

Caller: `server.Server` sets `admit` on the write's `operations.Ctx`, which `operations.Api`
calls before it stores a create or update of these kinds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kcm_apiserver import authz, errors, rbac
from kcm_apiserver.authn import User
from kcm_apiserver.rbac import Attributes, Rule

_ROLE_KINDS = {"Role": "roles", "ClusterRole": "clusterroles"}
_BINDING_KINDS = {"RoleBinding": "rolebindings", "ClusterRoleBinding": "clusterrolebindings"}
KINDS = frozenset(_ROLE_KINDS) | frozenset(_BINDING_KINDS)
_FULL_AUTHORITY: list[Rule] = [
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
]


def _strings(rule: Rule, key: str) -> list[str]:
    value = rule.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _atoms(rule: Rule) -> Iterator[Rule]:
    """A rule broken into one verb on one group/resource/name or one URL (upstream BreakdownRule)."""
    verbs = _strings(rule, "verbs")
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            names = _strings(rule, "resourceNames")
            for verb in verbs:
                if names:
                    for name in names:
                        yield {
                            "apiGroups": [group],
                            "resources": [resource],
                            "resourceNames": [name],
                            "verbs": [verb],
                        }
                else:
                    yield {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
    for url in _strings(rule, "nonResourceURLs"):
        for verb in verbs:
            yield {"nonResourceURLs": [url], "verbs": [verb]}


def _has_all(owned: list[str], wanted: list[str]) -> bool:
    return "*" in owned or all(w in owned for w in wanted)


def _resources_cover(owned: list[str], wanted: list[str]) -> bool:
    if "*" in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        # `*/status` in the owner's rule covers `pods/status`.
        _, slash, sub = resource.partition("/")
        if slash and "*/" + sub in owned:
            continue
        return False
    return True


def _rule_covers(owner: Rule, atom: Rule) -> bool:
    """upstream ruleCovers: the owner's rule grants at least what the atomic rule does."""
    if not _has_all(_strings(owner, "verbs"), _strings(atom, "verbs")):
        return False
    if "nonResourceURLs" in atom:
        return all(rbac.url_matches(owner, url) for url in _strings(atom, "nonResourceURLs"))
    names = _strings(owner, "resourceNames")
    return (
        _has_all(_strings(owner, "apiGroups"), _strings(atom, "apiGroups"))
        and _resources_cover(_strings(owner, "resources"), _strings(atom, "resources"))
        and (not names or all(n in names for n in _strings(atom, "resourceNames")))
    )


def missing(owned: list[Rule], requested: list[Rule]) -> list[Rule]:
    """The atomic rules of `requested` no rule of `owned` covers (upstream Covers)."""
    out: list[Rule] = []
    for rule in requested:
        for atom in _atoms(rule):
            if not any(_rule_covers(o, atom) for o in owned):
                out.append(atom)
    return out


def _compact(rules: list[Rule]) -> list[Rule]:
    """Rules on one group and resource merged across verbs (upstream CompactRules)."""
    simple: dict[tuple[str, str], Rule] = {}
    out: list[Rule] = []
    for rule in rules:
        if set(rule) == {"apiGroups", "resources", "verbs"}:
            key = (rule["apiGroups"][0], rule["resources"][0])
            if key in simple:
                simple[key]["verbs"] = simple[key]["verbs"] + rule["verbs"]
            else:
                simple[key] = dict(rule)
        else:
            out.append(rule)
    return out + list(simple.values())


def compact_string(rule: Rule) -> str:
    """rbacv1helpers.CompactString: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`."""
    parts = []
    for key, label in (
        ("apiGroups", "APIGroups"),
        ("resources", "Resources"),
        ("nonResourceURLs", "NonResourceURLs"),
        ("resourceNames", "ResourceNames"),
        ("verbs", "Verbs"),
    ):
        values = _strings(rule, key)
        if values:
            parts.append(f"{label}:[" + " ".join(json.dumps(v) for v in values) + "]")
    return "{" + ", ".join(parts) + "}"


def _confirm_no_escalation(user: User, namespace: str, rules: list[Rule], evaluator: rbac.Evaluator) -> str:
    """'' when the user holds every rule, else upstream's message listing what is missing."""
    owned, problems = evaluator.rules_for(user.username, user.groups, namespace)
    lacking = missing(owned, rules)
    if not lacking:
        return ""
    described = sorted({compact_string(r) for r in _compact(lacking)})
    groups = "[" + " ".join(json.dumps(g) for g in user.groups) + "]"
    message = (
        f"user {json.dumps(user.username)} (groups={groups}) is attempting to grant RBAC permissions "
        "not currently held:\n" + "\n".join(described)
    )
    if problems:
        message += f"; resolution errors: [{rbac.aggregate(problems)}]"
    return message


# What the garbage collector changes on any object; an update of only these grants nothing.
_GC_FIELDS = frozenset({"ownerReferences", "finalizers", "resourceVersion", "managedFields"})


def _only_gc_fields(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """upstream IsOnlyMutatingGCFields: the objects equal but for owners and finalizers."""

    def rest(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**obj, "metadata": meta}

    return rest(new) == rest(old)


def admit(
    user: User,
    authorizer: authz.Authorizer,
    kind: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
) -> None:
    """Raise 403 unless `user` may write this role or binding (create, or update of `old`)."""
    if authz.PRIVILEGED_GROUP in user.groups or (old is not None and _only_gc_fields(obj, old)):
        return
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace", "")) if kind in ("Role", "RoleBinding") else ""
    resource = _ROLE_KINDS.get(kind) or _BINDING_KINDS[kind]
    evaluator = authorizer.evaluator
    if kind in _ROLE_KINDS:
        escalate = Attributes(
            user.username, user.groups, "escalate", True, namespace, rbac.GROUP, resource, "", name
        )
        if authorizer.authorize(escalate)[0]:
            return
        rules = [r for r in obj.get("rules") or () if isinstance(r, dict)]
        problem = _confirm_no_escalation(user, namespace, rules, evaluator)
        aggregates = kind == "ClusterRole" and bool(obj.get("aggregationRule"))
        if not problem and aggregates and _confirm_no_escalation(user, namespace, _FULL_AUTHORITY, evaluator):
            problem = "must have cluster-admin privileges to use the aggregationRule"
    else:
        ref = obj.get("roleRef") or {}
        ref_kind, ref_name = str(ref.get("kind", "")), str(ref.get("name", ""))
        bind = Attributes(
            user.username,
            user.groups,
            "bind",
            True,
            namespace,
            rbac.GROUP,
            _ROLE_KINDS.get(ref_kind, ""),
            "",
            ref_name,
        )
        if authorizer.authorize(bind)[0]:
            return
        try:
            rules = evaluator.role_rules(ref_kind, ref_name, namespace)
        except LookupError as exc:
            problem = str(exc)
        else:
            problem = _confirm_no_escalation(user, namespace, rules, evaluator)
    if problem:
        raise errors.ApiError(
            403,
            "Forbidden",
            f'{resource}.{rbac.GROUP} "{name}" is forbidden: {problem}',
            details={"name": name, "group": rbac.GROUP, "kind": resource},
        )
