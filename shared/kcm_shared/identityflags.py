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
from pathlib import Path

from kcm_shared import controller, errors


def add_root_ca_file(p: controller.FlagSet) -> None:
    p.add_argument(
        "--root-ca-file",
        default="",
        help="root certificate authority put in service account token Secrets and kube-root-ca.crt "
        "ConfigMaps (default: the CA of the kubeconfig, if any)",
    )


def add_service_account_private_key_file(p: controller.FlagSet) -> None:
    p.add_argument(
        "--service-account-private-key-file",
        default="",
        help="PEM RSA private key that signs service account tokens (none: the token controller is off)",
    )


def add_cluster_signing_files(p: controller.FlagSet) -> None:
    p.add_argument(
        "--cluster-signing-cert-file",
        default="",
        help="PEM x509 CA certificate that signs cluster certificates",
    )
    p.add_argument("--cluster-signing-key-file", default="", help="PEM RSA or ECDSA private key of that CA")


def read_root_ca(args: argparse.Namespace) -> bytes:
    """The bytes of --root-ca-file, b"" when unset; errors.ConfigError when unreadable (upstream
    stops the controller manager on a bad root CA file)."""
    path = getattr(args, "root_ca_file", "")
    if not path:
        return b""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise errors.ConfigError(f"error reading root-ca-file at {path}: {exc}") from exc
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise errors.ConfigError(
            f"error parsing root-ca-file at {path}: data does not contain any valid RSA or ECDSA certificates"
        )
    return data
