"""What the service account controllers share: views of ServiceAccounts and Secrets, and
upstream's names for token Secrets (k8s.io/api/core/v1 and apiserver's serviceaccount util).

Used by the serviceaccount-token-controller and the legacy-serviceaccount-token-cleaner.
A cached Secret never carries its data (the watcher redacts it, docs/bus.md): these views
hold only what the bus has, and a controller that needs a token reads the Secret from the
API server.
"""

from __future__ import annotations

import msgspec

from kcm_shared.apimachinery import codec, gvr

SECRETS = gvr.Resource("", "v1", "secrets")
SERVICEACCOUNTS = gvr.Resource("", "v1", "serviceaccounts")
PODS = gvr.Resource("", "v1", "pods")

SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"  # v1.SecretTypeServiceAccountToken
NAME_KEY = "kubernetes.io/service-account.name"  # v1.ServiceAccountNameKey
UID_KEY = "kubernetes.io/service-account.uid"  # v1.ServiceAccountUIDKey
TOKEN_KEY = "token"  # v1.ServiceAccountTokenKey
ROOT_CA_KEY = "ca.crt"  # v1.ServiceAccountRootCAKey
NAMESPACE_KEY = "namespace"  # v1.ServiceAccountNamespaceKey


class SecretView(codec.Meta):
    type: str = ""


class ObjectReferenceView(codec.View):
    name: str = ""


class ServiceAccountView(codec.Meta):
    secrets: list[ObjectReferenceView] = msgspec.field(default_factory=list)


def is_token_secret(secret: SecretView) -> bool:
    return secret.type == SERVICE_ACCOUNT_TOKEN


def token_owner(secret: SecretView) -> tuple[str, str]:
    """(name, uid) of the ServiceAccount a token Secret's annotations name; uid may be ""."""
    annotations = secret.metadata.annotations
    return annotations.get(NAME_KEY, ""), annotations.get(UID_KEY, "")


def references(sa: ServiceAccountView, secret_name: str) -> bool:
    """Whether the ServiceAccount lists the Secret in `secrets` (an auto-generated token)."""
    return any(ref.name == secret_name for ref in sa.secrets)


def owns(sa: ServiceAccountView, secret: SecretView) -> bool:
    """Upstream IsServiceAccountToken: a token Secret naming this ServiceAccount (and its uid,
    when the Secret records one)."""
    name, uid = token_owner(secret)
    return is_token_secret(secret) and name == sa.metadata.name and uid in ("", sa.metadata.uid)
