"""Type checking of a ValidatingAdmissionPolicy's expressions, as upstream's TypeChecker
(k8s.io/apiserver/pkg/admission/plugin/policy/validating/typechecking.go).

- `TypeChecker().check(view)`: the `expressionWarnings` of the policy's status, each
  `{"fieldRef": "spec.validations[i].expression" | "...messageExpression", "warning": text}`,
  in upstream's order.
- Coverage: none yet. kcm has no CEL type checker (docs/controllers.md, "ValidatingAdmissionPolicy
  status controller"); where it cannot decide it warns nothing rather than something wrong,
  so every policy gets an empty list.
Called by `controller.py` once per new generation of a policy.
"""

from __future__ import annotations

from kcm_controllers.vapstatus import policy


class TypeChecker:
    async def check(self, view: policy.PolicyView) -> list[dict[str, str]]:
        return []
