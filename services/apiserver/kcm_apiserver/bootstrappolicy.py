"""The bootstrap ClusterRoles and ClusterRoleBindings the API server creates at start, after
upstream's RBAC post-start hook (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go and
pkg/registry/rbac/rest/storage_rbac.go).

The objects are data, `bootstrap_clusterroles.yaml` beside this module: cluster-admin, the
user-facing admin, edit and view with their aggregation rules, and the
system:aggregate-to-admin/edit/view roles whose rules those aggregate; system:basic-user,
system:discovery, system:public-info-viewer, system:auth-delegator and system:monitoring;
and upstream's bindings of cluster-admin (system:masters) and of those (auth-delegator has
none). `Api.__init__` creates each one that is absent; one already stored (a restart with a
data dir, or a role a user edited) is left as it is.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

DATA = "bootstrap_clusterroles.yaml"


def objects() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoles, then their ClusterRoleBindings: fresh copies on every call."""
    text = resources.files("kcm_apiserver").joinpath(DATA).read_text()
    found: list[dict[str, Any]] = yaml.safe_load(text)
    return found
