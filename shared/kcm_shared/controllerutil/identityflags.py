"""The cluster identity flags several controllers share, as kube-controller-manager names them.

`--root-ca-file` (the CA put in token Secrets and the `kube-root-ca.crt` ConfigMaps),
`--service-account-private-key-file` (signs legacy Secret tokens), and
`--cluster-signing-cert-file` / `--cluster-signing-key-file` (the CA the CSR signer will use).
Controllers declare the ones they read from their `Spec.flags` through these functions, so
the names, defaults and help are one; two controllers declaring one flag is fine (the first
declaration counts). `kcm dev` passes all four, pointing at STATE_DIR/pki.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from cryptography import x509

from kcm_shared import runtime
from kcm_shared.base import errors
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.identity")


def add_root_ca_file(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--root-ca-file",
        default="",
        help="root certificate authority put in service account token Secrets and kube-root-ca.crt "
        "ConfigMaps (default: the CA of the kubeconfig, if any)",
    )


def add_service_account_private_key_file(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--service-account-private-key-file",
        default="",
        help="PEM RSA private key that signs service account tokens (none: the token controller is off)",
    )


def add_cluster_signing_files(p: runtime.FlagSet) -> None:
    p.add_argument(
        "--cluster-signing-cert-file",
        default="",
        help="PEM x509 CA certificate that signs cluster certificates",
    )
    p.add_argument("--cluster-signing-key-file", default="", help="PEM RSA or ECDSA private key of that CA")


def read_ca(path: str) -> str:
    """The PEM bundle at `path`; errors.ConfigError unless it holds at least one certificate
    (upstream stops the controller manager on a bad root CA file)."""
    try:
        raw = Path(path).read_bytes()
        x509.load_pem_x509_certificates(raw)
        return raw.decode("ascii")
    except (OSError, ValueError) as exc:
        raise errors.ConfigError(f"error parsing root-ca-file at {path}: {exc}") from exc


def root_ca(args: argparse.Namespace, conn: kubeclient.Connection) -> str:
    """`--root-ca-file`'s bundle, else the CA the controller's kubeconfig trusts, else empty:
    upstream's choice for both the token controller and the root CA publisher."""
    path = getattr(args, "root_ca_file", "") or ""
    if path:
        return read_ca(path)
    if conn.ca_file:
        return read_ca(conn.ca_file)
    log.warning("no --root-ca-file and no CA in the kubeconfig: publishing no CA")
    return ""
