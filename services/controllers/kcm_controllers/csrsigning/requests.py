"""What each kubernetes.io signer accepts: upstream signer.go's isKubeletServing,
isKubeletClient, isKubeAPIServerClient (validAPIServerClientUsages) and isLegacyUnknown.

`signer_error(signer, request, usages)` is the message the signing controller writes into the
Failed condition, or None when the signer may sign it. Called by `controller`.
"""

from __future__ import annotations

from cryptography import x509
from kcm_shared.controllerutil import csr


def api_server_client_error(usages: list[str]) -> str | None:
    """client auth required; digital signature and key encipherment allowed; nothing else."""
    has_client_auth = False
    for usage in usages:
        if usage == "client auth":
            has_client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            return f"invalid usage for client certificate: {usage}"
    if not has_client_auth:
        return "missing required usage for client certificate: client auth"
    return None


def signer_error(signer: str, request: x509.CertificateSigningRequest, usages: list[str]) -> str | None:
    if signer == csr.KUBELET_SERVING:
        return csr.kubelet_serving_error(request, set(usages))
    if signer == csr.KUBELET_CLIENT:
        return csr.kubelet_client_error(request, set(usages))
    if signer == csr.KUBE_APISERVER_CLIENT:
        return api_server_client_error(usages)
    return None  # legacy-unknown: no restriction, for v1beta1's compatibility
