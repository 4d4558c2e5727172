"""What kubectl's /openapi/v2 fetch costs on the embedded API server; run by `make bench`.

kubectl fetches /openapi/v2 as protobuf on every `create -f`/`apply -f` of a `kind: List`, and
revalidates it with If-None-Match when its cache has it. This starts `kcm apiserver` and times,
sequentially, medians over `--requests` requests: the protobuf document served from memory, the
304 of a revalidation, and the first fetch after a CRD change (which rebuilds the document),
each beside the baseline kubectl pays for a single object today: the v3 document of apps/v1.

Run: `.venv/bin/python bench/openapi_v2.py [--requests 50] [--rebuilds 10]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import benchlib

PROTOBUF = {"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
NAME = "benches.bench.kcm.dev"


def crd(description: str) -> dict[str, Any]:
    """A CRD whose schema differs by `description`: each change makes the server rebuild /openapi/v2."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "bench.kcm.dev",
            "scope": "Namespaced",
            "names": {"plural": "benches", "singular": "bench", "kind": "Bench"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": description}},
                }
            ],
        },
    }


async def timed(request: Callable[[], Awaitable[object]], n: int) -> float:
    """Median milliseconds of `n` sequential requests."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await request()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def bench(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            benchlib.apiserver(benchlib.kcm_command(args), Path(tmp)) as server,
            benchlib.client_session(4) as session,
        ):
            v2, v3 = f"{server.url}/openapi/v2", f"{server.url}/openapi/v3/apis/apps/v1"
            crds = f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

            async def get(url: str, headers: dict[str, str] = benchlib.JSON) -> bytes:
                return await benchlib.call(session, "GET", url, headers=headers, allowed=(304,))

            start = time.perf_counter()
            await get(v2, PROTOBUF)
            cold = (time.perf_counter() - start) * 1000
            async with session.get(v2, headers=PROTOBUF) as resp:
                etag = resp.headers["ETag"]
                size = len(await resp.read())
            baseline = await timed(lambda: get(v3), args.requests)
            cached = await timed(lambda: get(v2, PROTOBUF), args.requests)
            revalidated = await timed(lambda: get(v2, {**PROTOBUF, "If-None-Match": etag}), args.requests)

            await benchlib.call(session, "POST", crds, crd("0"))
            rebuilds = []
            for i in range(args.rebuilds):
                await benchlib.call(
                    session,
                    "PATCH",
                    f"{crds}/{NAME}",
                    crd(str(i + 1)),
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                start = time.perf_counter()
                await get(v2, PROTOBUF)
                rebuilds.append((time.perf_counter() - start) * 1000)
            rebuilt = statistics.median(rebuilds)
    print(
        f"/openapi/v2 protobuf: {size:,} bytes; first fetch after start {cold:.0f} ms (builds v2 from the v3 made at start)"
    )
    print(f"{'median ms, sequential':42} {'figure':>8} {'baseline':>9} {'ratio':>6}")
    print("baseline: GET /openapi/v3/apis/apps/v1 (kubectl's fetch for one Deployment)")
    for label, figure in (
        ("GET /openapi/v2 protobuf, cached", cached),
        ("GET /openapi/v2 If-None-Match -> 304", revalidated),
        ("GET /openapi/v2 after a CRD change", rebuilt),
    ):
        print(f"{label:42} {figure:8.2f} {baseline:9.2f} {benchlib.ratio(figure, baseline):>6}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    benchlib.add_kcm_argument(parser)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--rebuilds", type=int, default=10)
    raise SystemExit(benchlib.run(bench(parser.parse_args())))
