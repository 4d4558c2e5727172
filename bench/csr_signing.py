"""How fast kubelet client CSRs are signed, beside the API server's own create rate; `make bench`.

Runs `kcm dev --controllers csrsigning --nodes 0` (the embedded API server) and files CSRS
kubelet client CertificateSigningRequests (signer kube-apiserver-client-kubelet, subject
`system:node:bench-<i>` / O=system:nodes, EC P-256 keys made beforehand), `--concurrency` at a
time. Phases, each timed:
1. create: the CSRs posted: the API server's own rate (the baseline);
2. approve and sign: each approved through its `approval` subresource (what the approving
   controller does after its SubjectAccessReview, which the embedded API server does not serve
   yet) while a watch notes when each certificate appears; the rate is CSRS over the time from the
   first approval to the last certificate.
Printed: both rates and their ratio; the CPU seconds per certificate of the controller process
and of the API server over phase 2; and, steadier on a shared machine, `authority.sign` alone in
this process (CPU µs per certificate with `kcm dev`'s RSA 2048 CA, request parsing and the
signer's checks included). Timings are printed, never enforced.

The controllers run with `--kube-api-qps` and `--kube-api-burst` at `--qps` (1000): at upstream's
default of 20 each certificate's status write waits for the client's rate limiter, and the rate
is that limit (pass `--qps 20` to see it).

Run: `.venv/bin/python bench/csr_signing.py [--csrs 1000] [--concurrency 16] [--qps 1000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import benchlib
import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kcm_cli import pki
from kcm_controllers.csrsigning import authority, requests
from kcm_shared.controllerutil import csr

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
USAGES = ["digital signature", "client auth"]


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""  # the API's name


class _Status(msgspec.Struct):
    certificate: str = ""


class _CSR(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _Status = msgspec.field(default_factory=_Status)


class _Event(msgspec.Struct):
    type: str
    object: _CSR


def request_pem(node: str) -> bytes:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
        ]
    )
    key = ec.generate_private_key(ec.SECP256R1())
    built = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return built.public_bytes(serialization.Encoding.PEM)


def body(i: int, pem: bytes) -> dict[str, object]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": f"bench-{i}"},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": csr.KUBELET_CLIENT,
            "usages": USAGES,
        },
    }


async def run_all(concurrency: int, jobs: list[Coroutine[Any, Any, bytes]]) -> None:
    """Await `jobs`, `concurrency` at a time."""
    queue = list(jobs)

    async def worker() -> None:
        while queue:
            await queue.pop()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def in_process(ca_dir: Path, count: int) -> float:
    """CPU µs per certificate of parse + check + sign with `kcm dev`'s CA."""
    files = pki.ensure(ca_dir)
    ca = authority.load(str(files.ca_cert), str(files.ca_key))
    pems = [request_pem(f"p{i}") for i in range(count)]
    began = time.process_time()
    for pem in pems:
        request = csr.parse_request(pem)
        assert requests.signer_error(csr.KUBELET_CLIENT, request, USAGES) is None
        authority.sign(ca, request, USAGES, dt.timedelta(hours=8760), dt.datetime.now(dt.UTC))
    return (time.process_time() - began) / count * 1e6


async def bench(args: argparse.Namespace) -> int:
    pems = [request_pem(f"bench-{i}") for i in range(args.csrs)]
    with tempfile.TemporaryDirectory(prefix="kcm-bench-csr-") as tmp:
        workdir = Path(tmp)
        dev_args = ["--controllers", "csrsigning", "--nodes", "0", f"--kube-api-qps={args.qps:g}"]
        dev_args.append(f"--kube-api-burst={int(args.qps)}")
        async with benchlib.kcm_dev(benchlib.kcm_command(args), workdir, dev_args) as dev:
            procs = {benchlib.service_name(pid): pid for pid in benchlib.descendants(dev.proc.pid)}
            watched = {n: p for n, p in procs.items() if n.startswith(("kcm controller", "kcm apiserver"))}
            async with benchlib.client_session(args.concurrency + 2) as session:
                url = dev.url + CSRS
                began = time.perf_counter()
                await run_all(
                    args.concurrency,
                    [benchlib.call(session, "POST", url, body(i, p)) for i, p in enumerate(pems)],
                )
                create_rate = args.csrs / (time.perf_counter() - began)
                issued: dict[str, float] = {}

                def seen(obj: _CSR, at: float) -> None:
                    if obj.status.certificate:
                        issued.setdefault(obj.metadata.name, at)

                usage = benchlib.Usage()
                approved = {"type": "Approved", "status": "True", "reason": "Bench", "message": "bench"}
                decoder = msgspec.json.Decoder(_Event)
                async with benchlib.watching(session, url, decoder, seen) as watch:
                    with benchlib.measure(watched, usage):
                        began = time.perf_counter()
                        approvals = [
                            benchlib.call(
                                session,
                                "PATCH",
                                f"{url}/bench-{i}/approval",
                                {"status": {"conditions": [approved]}},
                                headers={"Content-Type": "application/merge-patch+json"},
                            )
                            for i in range(args.csrs)
                        ]
                        await run_all(args.concurrency, approvals)
                        await benchlib.wait_until(
                            lambda: len(issued) >= args.csrs, watch, 600, "every certificate"
                        )
                        sign_rate = args.csrs / (max(issued.values()) - began)
        per_cert = in_process(workdir / "pki", min(args.csrs, 300))
    print(
        f"{args.csrs} kubelet client CSRs, {args.concurrency} requests at a time (embedded API server, "
        f"controllers' --kube-api-qps {args.qps:g})"
    )
    print(f"{'phase':<38} {'per second':>11} {'ratio to create':>16}")
    print(f"{'create (the API server, baseline)':<38} {benchlib.fmt(create_rate, 0):>11} {'1.00':>16}")
    print(
        f"{'approve -> certificate (csrsigning)':<38} {benchlib.fmt(sign_rate, 0):>11} "
        f"{benchlib.ratio(sign_rate, create_rate):>16}"
    )
    print(f"\nCPU over approve -> certificate, per certificate ({usage.seconds:.1f} s wall)")
    for name, seconds in sorted(usage.cpu.items()):
        print(f"{name:<38} {benchlib.fmt(seconds / args.csrs * 1e3, 2):>8} ms")
    print(
        f"{'authority.sign in this process':<38} {benchlib.fmt(per_cert / 1e3, 2):>8} ms (parse, check, sign)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csrs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--qps",
        type=float,
        default=1000.0,
        help="the controllers' --kube-api-qps and --kube-api-burst (upstream's default, 20, caps the "
        "signing at about 20 certificates/s: one status write each)",
    )
    benchlib.add_kcm_argument(parser)
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
