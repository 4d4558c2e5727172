"""A controller's `deploy.yaml`, the file beside its code that says how it is deployed.

`read(spec)` finds it in the package the Spec names (`Spec.package`) and parses it; its
`service_account` is the name of the controller's ServiceAccount (upstream's, from
bootstrappolicy's controller_policy.go). Called by the launcher's `kcm manifests`, which reads the
rest (replicas, rules, args, mounts), and by the controller Manager under
`--use-service-account-credentials`, whose controller clients authenticate as that account: so
the account a controller runs as and the one its RBAC is written for are one name.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from typing import Any

import yaml

from kcm_shared.runtime.spec import Spec


@dataclass(frozen=True)
class DeployFile:
    where: str  # package/deploy.yaml, for messages
    text: str  # as written, comments and all
    data: dict[str, Any]

    @property
    def service_account(self) -> str:
        sa = self.data.get("serviceAccount")
        if not isinstance(sa, str) or not sa:
            raise ValueError(f"{self.where}: want serviceAccount (a name)")
        return sa


def read(spec: Spec) -> DeployFile:
    """The Spec's deploy.yaml; ValueError (or OSError) when there is none or it is no mapping."""
    package = spec.package
    if not package:
        raise ValueError(
            f"{spec.name}: its Spec names no package, so its deploy.yaml cannot be found "
            "(set package=__package__ in the Spec, in the controller's folder)"
        )
    where = f"{package}/deploy.yaml"
    text = (importlib.resources.files(package) / "deploy.yaml").read_text()
    data: Any = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{where}: want a mapping")
    return DeployFile(where, text, data)
