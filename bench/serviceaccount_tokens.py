"""What verifying service account tokens costs the embedded API server; run by `make bench`.

Starts `kcm apiserver` with the identity files `kcm dev` makes (`kcm_cli.pki`), a
ServiceAccount, a TokenRequest token and a legacy Secret token, then measures GETs of one
ConfigMap per second `--concurrency` at a time, in rounds that interleave three clients (the
order rotating from round to round, since this machine's speed drifts): no token (the
baseline: what controllers send under `kcm dev`), a bound token (RS256 verification, then the
ServiceAccount looked up) and a legacy token (the same, plus the Secret and its data compared;
its last-used label is already today, so no write). Prints the median requests/s of each and
its ratio to the baseline. Then, steadier on a shared machine, the same three calls of the
authenticator alone in this process (`authn.Authenticator.authenticate`, µs per call), beside
the baseline's whole request time. Timings are printed, never enforced.

Run: `.venv/bin/python bench/serviceaccount_tokens.py [--requests 5000] [--rounds 9]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import benchlib
import msgspec
import yaml
from kcm_apiserver import authn
from kcm_apiserver import main as apiserver_main
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store
from kcm_cli import pki
from kcm_shared.apis import satoken

NAMESPACE = "bench-tokens"


async def start(command: list[str], workdir: Path) -> tuple[str, asyncio.subprocess.Process]:
    files = pki.ensure(workdir / "pki")
    kubeconfig = workdir / "kubeconfig"
    argv = [
        "apiserver",
        "--port=0",
        f"--kubeconfig-out={kubeconfig}",
        f"--service-account-key-file={files.sa_pub}",
        f"--service-account-signing-key-file={files.sa_key}",
        "--log-level=warning",
    ]
    proc = await benchlib.start_logged([*command, *argv], workdir / "apiserver.log")
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if proc.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"kcm apiserver did not become ready:\n{benchlib.tail(workdir / 'apiserver.log')}"
            )
        await asyncio.sleep(0.05)
    url = str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    return url, proc


async def tokens(session: aiohttp.ClientSession, url: str, key: Path) -> tuple[str, str]:
    """(bound token, legacy token) of a fresh ServiceAccount."""
    call = benchlib.call
    await call(session, "POST", f"{url}/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    ns = f"{url}/api/v1/namespaces/{NAMESPACE}"
    sa = msgspec.json.decode(
        await call(session, "POST", f"{ns}/serviceaccounts", {"metadata": {"name": "bench"}})
    )
    await call(session, "POST", f"{ns}/configmaps", {"metadata": {"name": "target"}, "data": {"k": "v"}})
    request = await call(session, "POST", f"{ns}/serviceaccounts/bench/token", {"spec": {}})
    bound = str(msgspec.json.decode(request)["status"]["token"])
    signer = satoken.Signer(satoken.load_private_key(key), satoken.LEGACY_ISSUER)
    legacy = signer.sign(satoken.legacy_claims(NAMESPACE, "bench", sa["metadata"]["uid"], "bench-token"))
    secret = {
        "metadata": {"name": "bench-token", "annotations": {"kubernetes.io/service-account.name": "bench"}},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64.b64encode(legacy.encode()).decode()},
    }
    await call(session, "POST", f"{ns}/secrets", secret)
    return bound, legacy


async def rate(
    session: aiohttp.ClientSession, url: str, token: str, requests: int, concurrency: int
) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    target = f"{url}/api/v1/namespaces/{NAMESPACE}/configmaps/target"
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await benchlib.call(session, "GET", target, headers=headers)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return requests / (time.perf_counter() - began)


def in_process(files: pki.Files, calls: int) -> dict[str, float]:
    """µs per `authenticate` call with no token, a bound token and a legacy token."""
    config = apiserver_main.service_account_tokens(
        apiserver_main.Options(
            service_account_key_files=[files.sa_pub], service_account_signing_key_file=files.sa_key
        )
    )
    assert config is not None and config.signer is not None
    api = Api(Store(None), Registry())
    ns_rt = api.registry.lookup("", "v1", "namespaces")
    assert ns_rt is not None
    api.create(Ctx(ns_rt), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    sa_rt, secret_rt = (
        api.registry.lookup("", "v1", "serviceaccounts"),
        api.registry.lookup("", "v1", "secrets"),
    )
    assert sa_rt is not None and secret_rt is not None
    sa = api.create(
        Ctx(sa_rt, NAMESPACE), {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "b"}}
    )
    uid = sa["metadata"]["uid"]
    bound = config.signer.sign(
        satoken.bound_claims(
            NAMESPACE, "b", uid, audiences=config.audiences, expiration_seconds=3600, now=config.now()
        )
    )
    legacy = satoken.Signer(satoken.load_private_key(files.sa_key), satoken.LEGACY_ISSUER).sign(
        satoken.legacy_claims(NAMESPACE, "b", uid, "b-token")
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "b-token", "annotations": {"kubernetes.io/service-account.name": "b"}},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64.b64encode(legacy.encode()).decode()},
    }
    api.create(Ctx(secret_rt, NAMESPACE), secret)
    authenticator = authn.Authenticator(api, None, config)
    out = {}
    for name, token in (("no token (baseline)", ""), ("bound token", bound), ("legacy token", legacy)):
        header = f"Bearer {token}" if token else ""
        authenticator.authenticate(header, [])  # first use: signature check, last-used label
        began = time.perf_counter()
        for _ in range(calls):
            authenticator.authenticate(header, [])
        out[name] = (time.perf_counter() - began) / calls * 1e6
    return out


async def bench(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="kcm-bench-tokens-") as tmp:
        workdir = Path(tmp)
        url, proc = await start(benchlib.kcm_command(args), workdir)
        try:
            async with benchlib.client_session(args.concurrency) as session:
                bound, legacy = await tokens(session, url, workdir / "pki" / "sa.key")
                clients = {"no token (baseline)": "", "bound token": bound, "legacy token": legacy}
                for token in clients.values():  # warm up; the legacy token gets its last-used label
                    await rate(session, url, token, 200, args.concurrency)
                rates: dict[str, list[float]] = {name: [] for name in clients}
                names = list(clients)
                for round_no in range(args.rounds):
                    order = names[round_no % len(names) :] + names[: round_no % len(names)]
                    for name in order:
                        rates[name].append(
                            await rate(session, url, clients[name], args.requests, args.concurrency)
                        )
        finally:
            await benchlib.stop(proc)
        costs = in_process(pki.ensure(workdir / "pki"), args.calls)
    baseline = statistics.median(rates[names[0]])
    print(f"GET of one ConfigMap, {args.concurrency} at a time, median of {args.rounds} rounds")
    print(f"{'client':<22} {'requests/s':>12} {'ratio to baseline':>18}")
    for name in names:
        median = statistics.median(rates[name])
        print(f"{name:<22} {benchlib.fmt(median, 0):>12} {benchlib.ratio(median, baseline):>18}")
    request_us = 1e6 / baseline
    print(f"\nauthenticate() in this process, {args.calls:,} calls each, beside a baseline request's time")
    print(f"{'client':<22} {'µs per call':>12} {'share of a request':>18}")
    for name in names:
        print(f"{name:<22} {benchlib.fmt(costs[name], 2):>12} {benchlib.ratio(costs[name], request_us):>18}")
    print(f"{'(baseline request)':<22} {benchlib.fmt(request_us, 2):>12}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000, help="GETs per client per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=20_000, help="authenticate() calls per client")
    benchlib.add_kcm_argument(parser)
    return benchlib.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
