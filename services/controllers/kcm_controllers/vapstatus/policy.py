"""The cached view of a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1).

- `PolicyView`: what the status controller and its type checker read: the generation, the
  validations' expressions, the resource rules and the observed generation.
- `status_apply(view, warnings)`: the server-side apply body of the status, as upstream's
  apply configuration serializes: observedGeneration, and typeChecking with
  expressionWarnings only when there are some (`typeChecking: {}` when nothing warns).
Used by `controller.py` and `typecheck.py`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, gvr

POLICIES = gvr.Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")


class Validation(codec.View):
    expression: str = ""
    message_expression: str = ""


class RuleWithOperations(codec.View):
    api_groups: list[str] = msgspec.field(default_factory=list)
    api_versions: list[str] = msgspec.field(default_factory=list)
    resources: list[str] = msgspec.field(default_factory=list)


class MatchResources(codec.View):
    resource_rules: list[RuleWithOperations] = msgspec.field(default_factory=list)


class PolicySpec(codec.View):
    validations: list[Validation] = msgspec.field(default_factory=list)
    match_constraints: MatchResources | None = None


class PolicyStatus(codec.View):
    observed_generation: int = 0


class PolicyView(codec.Meta):
    spec: PolicySpec = msgspec.field(default_factory=PolicySpec)
    status: PolicyStatus = msgspec.field(default_factory=PolicyStatus)


def status_apply(view: PolicyView, warnings: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{POLICIES.group}/{POLICIES.version}",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": view.metadata.name},
        "status": {
            "observedGeneration": view.metadata.generation,
            "typeChecking": {"expressionWarnings": warnings} if warnings else {},
        },
    }
