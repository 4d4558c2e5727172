"""Type checking of a ValidatingAdmissionPolicy's expressions, as upstream's TypeChecker
(k8s.io/apiserver/pkg/admission/plugin/policy/validating/typechecking.go).

- `TypeChecker(client).check(view)`: the `expressionWarnings` of the policy's status, each
  `{"fieldRef": "spec.validations[i].expression" | "...messageExpression", "warning": text}`,
  in upstream's order.
- The kinds checked are upstream's: from `spec.matchConstraints.resourceRules` without
  wildcards or subresources, each group x version x resource mapped to its kinds through
  discovery (refreshed once per policy when one is missing), at most 10, sorted by group,
  version and kind; a kind without an OpenAPI v3 schema is skipped.
- A warning's text is upstream's: per kind with issues, `<group>/<version>, Kind=<kind>: ` and
  cel-go's issues, then a newline; kinds joined by newlines.
- Where `celcheck` cannot decide an expression for some kind, that expression gets no warning
  at all (rather than one that differs from upstream's); docs/controllers.md lists what is typed.
Called by `controller.py` once per new generation of a policy.
"""

from __future__ import annotations

import logging
from typing import Any

from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient

from kcm_controllers.vapstatus import celcheck, policy, schema

log = logging.getLogger("kcm.vapstatus")

MAX_TYPES = 10  # upstream's maxTypesToCheck
GVK = tuple[str, str, str]


def _plain(values: list[str], skip: str) -> list[str] | None:
    """Upstream's extractGroups/Versions: None when any has a wildcard."""
    if any(any(c in v for c in skip) for v in values):
        return None
    return values


def _rules(view: policy.PolicyView) -> list[tuple[list[str], list[str], list[str]]]:
    match = view.spec.match_constraints
    out = []
    for rule in match.resource_rules if match is not None else []:
        groups, versions = _plain(rule.api_groups, "*"), _plain(rule.api_versions, "*")
        resources = [r for r in rule.resources if "*" not in r and "/" not in r]
        if groups and versions and resources:
            out.append((sorted(groups), sorted(versions), sorted(resources)))
    return out


def gvk_text(gvk: GVK) -> str:
    group, version, kind = gvk
    return f"{group}/{version}, Kind={kind}"


def warning_text(results: list[tuple[GVK, str]]) -> str:
    return "\n".join(f"{gvk_text(gvk)}: {issues}\n" for gvk, issues in results if issues)


class TypeChecker:
    def __init__(self, client: kubeclient.KubeClient) -> None:
        self.client = client
        self.mapper: discovery.Mapper | None = None

    async def _kinds(self, view: policy.PolicyView) -> list[GVK]:
        found: list[GVK] = []
        refreshed = False
        for groups, versions, resources in _rules(view):
            for group in groups:
                for version in versions:
                    for resource in resources:
                        kinds = await self._kinds_for(group, version, resource, False)
                        if kinds is None and not refreshed:
                            refreshed = True  # at most once per policy, as upstream
                            kinds = await self._kinds_for(group, version, resource, True)
                        for gvk in kinds or []:
                            if gvk not in found:
                                found.append(gvk)
                            if len(found) == MAX_TYPES:
                                return sorted(found)
        return sorted(found)

    async def _kinds_for(self, group: str, version: str, resource: str, refresh: bool) -> list[GVK] | None:
        """The kinds served for the resource; None when discovery (cached) does not know it."""
        if self.mapper is None or refresh:
            self.mapper = await discovery.discover(self.client)
        res = self.mapper.get(gvr.Resource(group, version, resource))
        return None if res is None else [(group, version, res.kind)]

    async def _types(self, gvks: list[GVK]) -> list[tuple[GVK, celcheck.Type]]:
        documents: dict[tuple[str, str], Any] = {}
        out = []
        for gvk in gvks:
            group, version, kind = gvk
            if (group, version) not in documents:
                try:
                    documents[(group, version)] = await self.client.get(schema.document_path(group, version))
                except kubeclient.ApiError as exc:
                    if not exc.not_found:
                        raise
                    documents[(group, version)] = None
            root = schema.root_type(documents[(group, version)], group, version, kind)
            if root is not None:
                out.append((gvk, root))
        return out

    async def check(self, view: policy.PolicyView) -> list[dict[str, str]]:
        types = await self._types(await self._kinds(view))
        warnings = []
        for i, validation in enumerate(view.spec.validations):
            for name, text in (
                ("expression", validation.expression),
                ("messageExpression", validation.message_expression),
            ):
                if name == "messageExpression" and not text:
                    continue
                results = [(gvk, celcheck.check(text, root)) for gvk, root in types]
                decided = [(gvk, issues) for gvk, issues in results if issues is not None]
                if len(decided) < len(results):
                    log.debug(
                        "expression not decided",
                        extra={"policy": view.metadata.name, "field": name, "index": i},
                    )
                    continue
                if any(issues for _, issues in decided):
                    warnings.append(
                        {"fieldRef": f"spec.validations[{i}].{name}", "warning": warning_text(decided)}
                    )
        return warnings
