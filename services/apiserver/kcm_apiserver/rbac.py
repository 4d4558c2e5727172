"""The RBAC authorizer: decisions from the stored Roles, ClusterRoles and their bindings.

- `Attributes` is one question (who, which verb, on what); `Evaluator.authorize` answers it
  as upstream's plugin/pkg/auth/authorizer/rbac does: allowed by the first rule of a binding
  that applies to the user (ClusterRoleBindings first, then the RoleBindings of the request's
  namespace), with upstream's reason text (`RBAC: allowed by ClusterRoleBinding "x" of
  ClusterRole "y" to User "z"`), or no opinion with the errors met on the way (a binding to a
  missing role) as its reason.
- `Evaluator.rules_for` lists the rules a user holds in a namespace (SelfSubjectRulesReview,
  escalation checks), with the same errors.
- Subjects as pkg/registry/rbac/validation/rule.go matches them: User by name, Group by
  membership, ServiceAccount by the username `system:serviceaccount:<ns>:<name>` (a
  RoleBinding's subject without a namespace means the binding's own).
- Fast enough for every request: bindings are indexed by the subject they name, and the index
  (with the grants found per user, groups and namespace) is rebuilt only after a write to
  RoleBindings or ClusterRoleBindings (`Store.revision`); rules are compiled once per stored
  version of a role; and decisions are remembered until the next write of any RBAC object.

Callers: `authz` (every request, impersonation, the access reviews), `escalation`,
bench/rbac.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kcm_apiserver.store import Obj, Store

GROUP = "rbac.authorization.k8s.io"
SA_PREFIX = "system:serviceaccount:"
CACHE_LIMIT = 10_000  # entries of each of the evaluator's caches
_KEYS = {
    "Role": f"{GROUP}/roles",
    "ClusterRole": f"{GROUP}/clusterroles",
    "RoleBinding": f"{GROUP}/rolebindings",
    "ClusterRoleBinding": f"{GROUP}/clusterrolebindings",
}
Rule = dict[str, Any]


@dataclass(frozen=True)
class Attributes:
    """What one request asks (upstream's authorizer.Attributes)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


# -- rules ----------------------------------------------------------------------------------------


def _strings(rule: Rule, key: str) -> list[str]:
    value = rule.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def url_matches(rule: Rule, path: str) -> bool:
    return _url_in(_strings(rule, "nonResourceURLs"), path)


def _url_in(urls: Sequence[str], path: str) -> bool:
    """A trailing `*` matches any rest of the path; `*` alone, every path."""
    return any(url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])) for url in urls)


@dataclass(frozen=True, slots=True)
class Compiled:
    """A rule as sets, so a decision tests membership instead of walking lists."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def of(cls, rule: Rule) -> Compiled:
        return cls(
            frozenset(_strings(rule, "verbs")),
            frozenset(_strings(rule, "apiGroups")),
            frozenset(_strings(rule, "resources")),
            frozenset(_strings(rule, "resourceNames")),
            tuple(_strings(rule, "nonResourceURLs")),
        )

    def allows(self, a: Attributes) -> bool:
        if a.verb not in self.verbs and "*" not in self.verbs:
            return False
        if not a.resource_request:
            return _url_in(self.urls, a.path)
        if a.api_group not in self.groups and "*" not in self.groups:
            return False
        if self.names and a.name not in self.names:
            return False
        resources = self.resources
        if "*" in resources:
            return True
        if not a.subresource:
            return a.resource in resources
        return f"{a.resource}/{a.subresource}" in resources or "*/" + a.subresource in resources


# -- bindings ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """A binding seen through the subject of it that named the user."""

    order: tuple[int, int]  # (binding position, subject position): upstream's visiting order
    kind: str  # ClusterRoleBinding or RoleBinding
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subject_kind: str
    subject_text: str  # the subject as upstream's describeSubject quotes it

    def describe(self) -> str:
        binding = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return (
            f'{self.kind} "{binding}" of {self.role_kind} "{self.role_name}" '
            f'to {self.subject_kind} "{self.subject_text}"'
        )


def service_account_username(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def _subject_key(subject: Any, binding_namespace: str) -> tuple[str, str, str] | None:
    """("user"|"group", name, text for the reason) of a subject, None for one naming nobody."""
    if not isinstance(subject, dict):
        return None
    kind, name = subject.get("kind"), subject.get("name")
    if not isinstance(name, str):
        return None
    if kind == "User":
        return "user", name, name
    if kind == "Group":
        return "group", name, name
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        if not isinstance(namespace, str) or not namespace:
            return None
        return "user", service_account_username(namespace, name), f"{name}/{namespace}"
    return None


Index = dict[tuple[str, str], list[Grant]]


def _index(bindings: list[Obj], kind: str, namespaced: bool) -> dict[str, Index]:
    """Namespace ("" for ClusterRoleBindings) -> (user|group, name) -> the grants naming it."""
    out: dict[str, Index] = {}
    for position, binding in enumerate(bindings):
        meta = binding.get("metadata") or {}
        namespace = meta.get("namespace", "") if namespaced else ""
        ref = binding.get("roleRef") or {}
        seen: set[tuple[str, str]] = set()
        for sub_position, subject in enumerate(binding.get("subjects") or ()):
            key = _subject_key(subject, namespace)
            if key is None or key[:2] in seen:
                continue
            seen.add(key[:2])
            grant = Grant(
                (position, sub_position),
                kind,
                str(meta.get("name", "")),
                namespace,
                str(ref.get("kind", "")),
                str(ref.get("name", "")),
                str(subject["kind"]),
                key[2],
            )
            out.setdefault(namespace, {}).setdefault(key[:2], []).append(grant)
    return out


class Evaluator:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._revision: tuple[int, int] | None = None
        self._cluster: Index = {}
        self._namespaced: dict[str, Index] = {}
        # (kind, namespace, name) -> (the stored role, its rules compiled): recompiled when the
        # store holds another object (every write stores a new one).
        self._compiled: dict[tuple[str, str, str], tuple[Obj, list[Compiled]]] = {}
        # (user, groups, namespace) -> its grants, until the next binding write: the same
        # few users (controllers, kubectl users) make almost every request.
        self._grants: dict[tuple[str, tuple[str, ...], str], list[Grant]] = {}
        # Attributes -> (allowed, reason), until the next write of any RBAC object.
        self._decisions: dict[Attributes, tuple[bool, str]] = {}
        self._role_revisions: tuple[int, int] | None = None

    def _refresh(self) -> None:
        revisions = (
            self.store.revision(_KEYS["Role"]),
            self.store.revision(_KEYS["ClusterRole"]),
        )
        if revisions != self._role_revisions:
            self._decisions.clear()
            self._role_revisions = revisions
        revision = (
            self.store.revision(_KEYS["ClusterRoleBinding"]),
            self.store.revision(_KEYS["RoleBinding"]),
        )
        if revision == self._revision:
            return
        self._decisions.clear()
        crbs = self.store.list(_KEYS["ClusterRoleBinding"], None)
        self._cluster = _index(crbs, "ClusterRoleBinding", False).get("", {})
        self._namespaced = _index(self.store.list(_KEYS["RoleBinding"], None), "RoleBinding", True)
        self._grants.clear()
        self._revision = revision

    def grants(self, user: str, groups: Sequence[str], namespace: str) -> list[Grant]:
        """The bindings applying to the user, in upstream's order: ClusterRoleBindings, then
        the namespace's RoleBindings; each once, through its first subject naming the user."""
        self._refresh()
        cache_key = (user, tuple(groups), namespace)
        cached = self._grants.get(cache_key)
        if cached is not None:
            return cached
        keys = [("user", user), *(("group", g) for g in groups)]
        indexes = [self._cluster]
        if namespace:
            indexes.append(self._namespaced.get(namespace, {}))
        out: list[Grant] = []
        for index in indexes:
            found: dict[tuple[str, int], Grant] = {}
            for key in keys:
                for grant in index.get(key, ()):
                    ident = (grant.namespace, grant.order[0])
                    if ident not in found or grant.order < found[ident].order:
                        found[ident] = grant
            out += sorted(found.values(), key=lambda g: g.order)
        if len(self._grants) >= CACHE_LIMIT:
            self._grants.clear()  # bounded: names come from requests
        self._grants[cache_key] = out
        return out

    def compiled_rules(self, kind: str, name: str, namespace: str) -> list[Compiled]:
        """`role_rules`, compiled once per stored version of the role."""
        key = (kind, namespace if kind == "Role" else "", name)
        role = self.store.get(_KEYS.get(kind, ""), key[1], name) if kind in ("Role", "ClusterRole") else None
        cached = self._compiled.get(key)
        if role is not None and cached is not None and cached[0] is role:
            return cached[1]
        compiled = [Compiled.of(rule) for rule in self.role_rules(kind, name, namespace)]
        if role is not None:
            if len(self._compiled) >= CACHE_LIMIT:
                self._compiled.clear()  # deleted roles must not pile up
            self._compiled[key] = (role, compiled)
        return compiled

    def role_rules(self, kind: str, name: str, namespace: str) -> list[Rule]:
        """A role reference's rules; raises LookupError with upstream's text when unresolvable."""
        if kind == "Role":
            role = self.store.get(_KEYS["Role"], namespace, name)
            resource = "roles"
        elif kind == "ClusterRole":
            role = self.store.get(_KEYS["ClusterRole"], "", name)
            resource = "clusterroles"
        else:
            raise LookupError(f'unsupported role reference kind: "{kind}"')
        if role is None:
            raise LookupError(f'{resource}.{GROUP} "{name}" not found')
        return [r for r in role.get("rules") or () if isinstance(r, dict)]

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the first rule allowing, else no opinion with the errors met."""
        self._refresh()
        known = self._decisions.get(a)
        if known is None:
            known = self._decide(a)
            if len(self._decisions) >= CACHE_LIMIT:
                self._decisions.clear()
            self._decisions[a] = known
        return known

    def _decide(self, a: Attributes) -> tuple[bool, str]:
        problems: list[str] = []
        for grant in self.grants(a.user, a.groups, a.namespace):
            try:
                rules = self.compiled_rules(grant.role_kind, grant.role_name, grant.namespace)
            except LookupError as exc:
                problems.append(str(exc))
                continue
            if any(rule.allows(a) for rule in rules):
                return True, f"RBAC: allowed by {grant.describe()}"
        return False, f"RBAC: {aggregate(problems)}" if problems else ""

    def rules_for(self, user: str, groups: Sequence[str], namespace: str) -> tuple[list[Rule], list[str]]:
        """Every rule the user holds in the namespace (cluster-wide ones included), and the
        errors met resolving the bindings."""
        rules: list[Rule] = []
        problems: list[str] = []
        for grant in self.grants(user, groups, namespace):
            try:
                rules.extend(self.role_rules(grant.role_kind, grant.role_name, grant.namespace))
            except LookupError as exc:
                problems.append(str(exc))
        return rules, problems


def aggregate(messages: Sequence[str]) -> str:
    """Go's utilerrors aggregate: one message as it is, several as `[a, b]`, repeats dropped."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
