"""The signing controller's flags and which CA each signer uses.

Upstream cmd/kube-controller-manager/app/options/csrsigningcontroller.go (flags, Validate) and
app/certificates.go (startCSRSigningController, get*SignerFiles):
- `--cluster-signing-cert-file` / `--cluster-signing-key-file`: one CA for every signer; or
  `--cluster-signing-<signer>-cert-file` / `-key-file` per signer, never both kinds (upstream's
  error), and each per-signer pair whole (`"cluster-signing-<signer>": cannot specify key
  without cert`); `--cluster-signing-duration` (default 8760h), the longest lifetime signed.
- `disabled_by(args)`: "no csr cert/key was specified" leaves the controller off, as
  upstream; bad flags raise errors.ConfigError; `signer_files(args)`: the files each signer
  uses (a signer without files is skipped, and logged, as upstream).
"""

from __future__ import annotations

import argparse

from kcm_shared.apimachinery import goduration
from kcm_shared.base import errors
from kcm_shared.controllerutil import csr
from kcm_shared.runtime import FlagSet, upstreamflags

# The flag infix of each signer, in upstream's order of validation.
SIGNERS = {
    "kubelet-serving": csr.KUBELET_SERVING,
    "kubelet-client": csr.KUBELET_CLIENT,
    "kube-apiserver-client": csr.KUBE_APISERVER_CLIENT,
    "legacy-unknown": csr.LEGACY_UNKNOWN,
}
DEFAULT_DURATION = 8760 * 3600.0


def _attr(infix: str, part: str) -> str:
    return f"cluster_signing_{infix.replace('-', '_')}_{part}_file"


def flags(p: FlagSet) -> None:
    names = ["cluster-signing-cert-file", "cluster-signing-key-file"]
    names += [f"cluster-signing-{infix}-{part}-file" for infix in SIGNERS for part in ("cert", "key")]
    for name in names:
        p.add_argument(f"--{name}", default="", metavar="string", help=upstreamflags.FLAGS[name].help)
    p.add_argument(
        "--cluster-signing-duration",
        type=goduration.positive_seconds,
        default=DEFAULT_DURATION,
        metavar="duration",
        help=upstreamflags.FLAGS["cluster-signing-duration"].help,
    )


def _pair(args: argparse.Namespace, infix: str) -> tuple[str, str]:
    return getattr(args, _attr(infix, "cert"), ""), getattr(args, _attr(infix, "key"), "")


def _pair_error(cert: str, key: str) -> str | None:
    if key and not cert:
        return "cannot specify key without cert"
    if cert and not key:
        return "cannot specify cert without key"
    return None


def validate(args: argparse.Namespace) -> list[str]:
    """Upstream's CSRSigningControllerOptions.Validate, its messages in its order."""
    errs = [
        f'"cluster-signing-{infix}": {error}'
        for infix in SIGNERS
        if (error := _pair_error(*_pair(args, infix))) is not None
    ]
    single = bool(args.cluster_signing_cert_file or args.cluster_signing_key_file)
    if single and any(any(_pair(args, infix)) for infix in SIGNERS):
        errs.append(
            "cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time"
        )
    return errs


def disabled_by(args: argparse.Namespace) -> str | None:
    errs = validate(args)
    if errs:
        raise errors.ConfigError(errs[0] if len(errs) == 1 else f"[{', '.join(errs)}]")
    if not (args.cluster_signing_cert_file and args.cluster_signing_key_file) and not any(
        any(_pair(args, infix)) for infix in SIGNERS
    ):
        return "Skipping CSR signer controller because no csr cert/key was specified"
    return None


def signer_files(args: argparse.Namespace) -> dict[str, tuple[str, str] | None]:
    """Each signer's (cert, key) files, or None when it is skipped: the per-signer flags when any
    is set (then the shared pair counts for none), else the shared pair."""
    specific = any(any(_pair(args, infix)) for infix in SIGNERS)
    out: dict[str, tuple[str, str] | None] = {}
    for infix, signer in SIGNERS.items():
        cert, key = (
            _pair(args, infix)
            if specific
            else (args.cluster_signing_cert_file, args.cluster_signing_key_file)
        )
        out[signer] = (cert, key) if cert or key else None
    return out
