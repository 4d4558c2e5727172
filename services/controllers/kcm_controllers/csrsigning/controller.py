"""The CSR signing controller: certificates for approved requests to the kubernetes.io signers.

Upstream pkg/controller/certificates/signer/signer.go (with certificate_controller.go's sync
and app/certificates.go's start-up) on our runtime. Work keys are CSR names; a CSR added or
updated queues itself. A sync leaves alone a CSR that is gone, already has a certificate, is not
Approved (or is also Denied), has a true Failed condition, or names a signer without a CA here
(`config.signer_files`). Otherwise the request is checked as its signer requires
(`requests.signer_error`): a request that fails gets a `Failed` condition (status True, reason
`SignerValidationFailure`, the check's message), else it is signed (`authority.sign`) with the
lifetime `authority.duration` gives and the PEM goes to `status.certificate`. Both writes are
merge patches of the status subresource carrying the cached resourceVersion: a CSR changed
since it was cached fails with 409 and is synced again from the newer state. A request that
does not parse is an error (retried with backoff), as upstream's.

The CA files are read again when they change on disk (`authority.CAFiles`), as upstream's
dynamic certificate reloading does.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable

import msgspec
from kcm_shared import runtime
from kcm_shared.base import errors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import csr
from kcm_shared.runtime import cache

from kcm_controllers.csrsigning import authority, config, requests

log = logging.getLogger("kcm.csrsigning")

FAILURE_REASON = "SignerValidationFailure"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def failed_patch(view: csr.CSRView, message: str, now: dt.datetime) -> dict[str, object]:
    """The cached conditions and a Failed one after them, for this resourceVersion only."""
    failed = csr.Condition(
        type=csr.FAILED,
        status="True",
        reason=FAILURE_REASON,
        message=message,
        last_update_time=now.replace(microsecond=0),
    )
    conditions = msgspec.to_builtins([*view.status.conditions, failed])
    return {
        "metadata": {"resourceVersion": view.metadata.resource_version},
        "status": {"conditions": conditions},
    }


class Signer:
    """Handlers and sync; the API client, cache, CAs and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        csrs: cache.Cache[csr.CSRView],
        cas: dict[str, authority.Source],
        cert_ttl: dt.timedelta,
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.csrs = csrs
        self.cas = cas
        self.cert_ttl = cert_ttl
        self.now = now

    async def sync(self, name: str) -> runtime.Result | None:
        view = self.csrs.get("", name)
        if view is None or view.status.certificate:
            return None
        if not csr.is_approved(view) or csr.has_true_condition(view, csr.FAILED):
            return None
        source = self.cas.get(view.spec.signer_name)
        if source is None:
            return None
        try:
            request = csr.parse_request(view.request())
        except ValueError as exc:
            raise ValueError(f'unable to parse csr "{name}": {exc}') from None
        problem = requests.signer_error(view.spec.signer_name, request, view.spec.usages)
        if problem is not None:
            await self.client.patch(csr.path(name, "status"), failed_patch(view, problem, self.now()))
            return None
        ttl = authority.duration(view.spec.expiration_seconds, self.cert_ttl)
        try:
            pem = authority.sign(source.current(), request, view.spec.usages, ttl, self.now())
        except ValueError as exc:
            raise ValueError(f"error auto signing csr: {exc}") from None
        patch = {
            "metadata": {"resourceVersion": view.metadata.resource_version},
            "status": {"certificate": base64.b64encode(pem).decode()},
        }
        await self.client.patch(csr.path(name, "status"), patch)
        return None


def load_cas(files: dict[str, tuple[str, str] | None]) -> dict[str, authority.Source]:
    """The CA of each signer that has files (one source per distinct pair); ConfigError if unreadable."""
    loaded: dict[tuple[str, str], authority.CAFiles] = {}
    out: dict[str, authority.Source] = {}
    for signer, pair in files.items():
        if pair is None:
            log.info(
                "Skipping CSR signer controller because specific files were specified for other signers and not this one",
                extra={"controller": signer},
            )
            continue
        if pair not in loaded:
            try:
                loaded[pair] = authority.CAFiles(*pair)
            except ValueError as exc:
                raise errors.ConfigError(f"failed to start {signer} certificate controller: {exc}") from None
        out[signer] = loaded[pair]
    return out


def build(ctx: runtime.Context) -> runtime.Reconcile:
    cas = load_cas(config.signer_files(ctx.args))
    ttl = dt.timedelta(seconds=ctx.args.cluster_signing_duration)
    signer = Signer(ctx.client, ctx.caches[csr.CSRS], cas, ttl)
    csr.queue_changes(ctx.caches[csr.CSRS], ctx.enqueue)
    return signer.sync


SPEC = runtime.Spec(
    name="certificatesigningrequest-signing-controller",
    alias="csrsigning",
    primary=csr.CSRS,
    views={csr.CSRS: csr.CSRView},
    build=build,
    workers=5,  # upstream runs each signer with 5 workers and no flag
    flags=config.flags,
    disabled_by=config.disabled_by,
    queue_name="certificate",
    package=__package__,
)
