"""The CSR cleaner controller: deletes CertificateSigningRequests past upstream's deadlines.

Upstream pkg/controller/certificates/cleaner/cleaner.go on our runtime. `deadline(csr)` is
pure and holds upstream's criteria: a CSR goes
- when it is Approved, has a certificate, and that certificate's NotAfter has passed;
- an hour after an Approved condition's lastUpdateTime once it has a certificate;
- an hour after a Denied condition's lastUpdateTime;
- an hour after a Failed condition's lastUpdateTime;
- 24 hours after its creation while it has no condition at all (pending).
A condition without lastUpdateTime never counts, as upstream's zero time. A certificate that
is no PEM certificate fails upstream's whole check for that CSR; so it does here (logged).

Difference from upstream: upstream lists every CSR once an hour (one pass, in the one leader)
and deletes those past a deadline. Here the work keys are CSR names, each owned by exactly one
replica's partition: a CSR added or updated queues itself, and the sync deletes it when it is
due or asks to be run again at its next deadline (`Result(requeue_after=...)`). A CSR is
therefore deleted at its deadline, not up to an hour after it; which ones go is the same.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from cryptography import x509
from kcm_shared import runtime
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import csr
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.csrcleaner")

APPROVED_EXPIRATION = dt.timedelta(hours=1)
DENIED_EXPIRATION = dt.timedelta(hours=1)
PENDING_EXPIRATION = dt.timedelta(hours=24)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def certificate_not_after(view: csr.CSRView) -> dt.datetime:
    """NotAfter of the first certificate in status.certificate; ValueError when there is none."""
    pem = view.certificate()
    start = pem.find(b"-----BEGIN ")
    if start < 0:
        raise ValueError("expected the certificate associated with the CSR to be PEM encoded")
    try:
        return x509.load_pem_x509_certificate(pem[start:]).not_valid_after_utc
    except ValueError as exc:
        raise ValueError(f"unable to parse certificate data: {exc}") from None


def deadline(view: csr.CSRView) -> tuple[dt.datetime, str] | None:
    """When the CSR is due for deletion and why (the earliest criterion), or None: never."""
    found: list[tuple[dt.datetime, str]] = []
    issued = bool(view.status.certificate)
    conditions = view.status.conditions
    if issued and any(c.type == csr.APPROVED for c in conditions):
        found.append((certificate_not_after(view), "the associated certificate is expired"))
    for c in conditions:
        if c.last_update_time is None:
            continue
        if c.type == csr.APPROVED and issued:
            found.append(
                (
                    c.last_update_time + APPROVED_EXPIRATION,
                    f"more than {_go(APPROVED_EXPIRATION)} old and approved",
                )
            )
        elif c.type == csr.DENIED:
            found.append(
                (c.last_update_time + DENIED_EXPIRATION, f"more than {_go(DENIED_EXPIRATION)} old and denied")
            )
        elif c.type == csr.FAILED:
            found.append(
                (c.last_update_time + DENIED_EXPIRATION, f"more than {_go(DENIED_EXPIRATION)} old and failed")
            )
    created = view.metadata.creation_timestamp
    if not conditions and created is not None:
        found.append((created + PENDING_EXPIRATION, f"more than {_go(PENDING_EXPIRATION)} old and unhandled"))
    return min(found, key=lambda item: item[0]) if found else None


def _go(delta: dt.timedelta) -> str:
    """A whole number of hours as Go prints a Duration (1h0m0s)."""
    return f"{int(delta.total_seconds() // 3600)}h0m0s"


class Cleaner:
    """Handlers and sync; the API client, cache and clock are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        csrs: cache.Cache[csr.CSRView],
        *,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.csrs = csrs
        self.now = now

    async def sync(self, name: str) -> runtime.Result | None:
        view = self.csrs.get("", name)
        if view is None:
            return None
        try:
            due = deadline(view)
        except ValueError as exc:
            log.error("Error while attempting to clean CSR", extra={"csr": name, "error": str(exc)})
            return None
        if due is None:
            return None
        when, why = due
        left = (when - self.now()).total_seconds()
        if left >= 0:
            return runtime.Result(requeue_after=left + 1.0)  # strictly past the deadline, as upstream
        log.info(f"Cleaning CSR as it is {why}", extra={"csr": name})
        try:
            await self.client.delete(csr.path(name), {"preconditions": {"uid": view.metadata.uid}})
        except kubeclient.ApiError as exc:
            if not exc.not_found:
                raise
        return None


def build(ctx: runtime.Context) -> runtime.Reconcile:
    cleaner = Cleaner(ctx.client, ctx.caches[csr.CSRS])
    csr.queue_changes(ctx.caches[csr.CSRS], ctx.enqueue)
    return cleaner.sync


SPEC = runtime.Spec(
    name="certificatesigningrequest-cleaner-controller",
    alias="csrcleaner",
    primary=csr.CSRS,
    views={csr.CSRS: csr.CSRView},
    build=build,
    workers=1,  # upstream's one polling worker
    package=__package__,
)
