"""How fast kubelet client CSRs are approved and signed, beside the API server's own create
rate; `make bench`.

Runs `kcm dev --controllers csrsigning,csrapproving --nodes 0` (the embedded API server, which
authenticates bootstrap tokens and answers SubjectAccessReviews) and sets up what kubeadm does
for a node's TLS bootstrap: a bootstrap token Secret and the binding of
`certificatesigningrequests:nodeclient` to system:bootstrappers. EC P-256 keys and requests are
made beforehand; requests go `--concurrency` at a time. Phases, each timed:
1. create (the baseline): CSRS requests for a signer no controller handles, posted by the admin:
   the API server's own create rate, with nothing acting on them;
2. create -> approved -> certificate: CSRS kubelet client requests (signer
   kube-apiserver-client-kubelet, subject `system:node:bench-<i>` / O=system:nodes) posted with
   the bootstrap token, as kubelets bootstrapping would; csrapproving approves each after its
   SubjectAccessReview, csrsigning signs it, and a watch notes when each certificate appears.
   The rate is CSRS over the time from the first post to the last certificate.
Printed: both rates and their ratio; the CPU seconds per certificate of each controller process
and of the API server over phase 2; and, steadier on a shared machine, `authority.sign` alone in
this process (CPU µs per certificate with `kcm dev`'s RSA 2048 CA, request parsing and the
signer's checks included). Timings are printed, never enforced.

The controllers run with `--kube-api-qps` and `--kube-api-burst` at `--qps` (1000): at upstream's
default of 20 each certificate's approval and status writes wait for the client's rate limiter,
and the rate is that limit (pass `--qps 20` to see it).

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
UNHANDLED_SIGNER = "example.com/bench"  # the baseline's: no controller acts on it
TOKEN_ID, TOKEN_SECRET = "bench0", "0123456789abcdef"
SECRETS = "/api/v1/namespaces/kube-system/secrets"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


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


def body(name: str, pem: bytes, signer: str) -> dict[str, object]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": USAGES},
    }


def bootstrap_objects() -> list[tuple[str, dict[str, object]]]:
    """kubeadm's pieces of a node's TLS bootstrap: the token, and auto-approval for its group."""
    secret: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{TOKEN_ID}"},
        "stringData": {
            "token-id": TOKEN_ID,
            "token-secret": TOKEN_SECRET,
            "usage-bootstrap-authentication": "true",
        },
    }
    binding: dict[str, object] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench:node-autoapprove-bootstrap"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:bootstrappers"}
        ],
    }
    return [(SECRETS, secret), (BINDINGS, binding)]


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
    baseline_pems = [request_pem(f"base-{i}") for i in range(args.csrs)]
    pems = [request_pem(f"bench-{i}") for i in range(args.csrs)]
    with tempfile.TemporaryDirectory(prefix="kcm-bench-csr-") as tmp:
        workdir = Path(tmp)
        dev_args = ["--controllers", "csrsigning,csrapproving", "--nodes", "0"]
        dev_args += [f"--kube-api-qps={args.qps:g}", f"--kube-api-burst={int(args.qps)}"]
        async with benchlib.kcm_dev(benchlib.kcm_command(args), workdir, dev_args) as dev:
            procs = {benchlib.service_name(pid): pid for pid in benchlib.descendants(dev.proc.pid)}
            watched = {n: p for n, p in procs.items() if n.startswith(("kcm controller", "kcm apiserver"))}
            watched["kcm dev (the embedded API server)"] = dev.proc.pid
            async with benchlib.client_session(args.concurrency + 2) as session:
                for path, obj in bootstrap_objects():
                    await benchlib.call(session, "POST", dev.url + path, obj)
                url = dev.url + CSRS
                began = time.perf_counter()
                await run_all(
                    args.concurrency,
                    [
                        benchlib.call(session, "POST", url, body(f"base-{i}", p, UNHANDLED_SIGNER))
                        for i, p in enumerate(baseline_pems)
                    ],
                )
                create_rate = args.csrs / (time.perf_counter() - began)
                issued: dict[str, float] = {}

                def seen(obj: _CSR, at: float) -> None:
                    if obj.status.certificate:
                        issued.setdefault(obj.metadata.name, at)

                usage = benchlib.Usage()
                decoder = msgspec.json.Decoder(_Event)
                as_bootstrapper = {**benchlib.JSON, "Authorization": f"Bearer {TOKEN_ID}.{TOKEN_SECRET}"}
                async with benchlib.watching(session, url, decoder, seen) as watch:
                    with benchlib.measure(watched, usage):
                        began = time.perf_counter()
                        creates = [
                            benchlib.call(
                                session,
                                "POST",
                                url,
                                body(f"bench-{i}", p, csr.KUBELET_CLIENT),
                                headers=as_bootstrapper,
                            )
                            for i, p in enumerate(pems)
                        ]
                        await run_all(args.concurrency, creates)
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
        f"{'create -> approved -> certificate':<38} {benchlib.fmt(sign_rate, 0):>11} "
        f"{benchlib.ratio(sign_rate, create_rate):>16}"
    )
    print(f"\nCPU over create -> certificate, per certificate ({usage.seconds:.1f} s wall)")
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
