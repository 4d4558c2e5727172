"""A controller for the invariant tests: it reconciles ConfigMaps and records every sync.

Each reconcile appends one JSON line (pid, key, start, end, the `value` it saw) to the file
named by $PROBE_LOG, with O_APPEND so lines from several replicas never interleave. The
ConfigMap's data steers it: `fail: "true"` raises (retried with backoff for ever),
`fail: "terminal"` raises `runtime.TerminalError` (straight to the dead-letter subject),
`sleep: "S"` holds the reconcile S seconds (to catch overlaps and stuck loops).
Run as `kcm controller --plugin tests.e2e.probe_controller:SPEC ...`.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr

CONFIGMAPS = gvr.Resource("", "v1", "configmaps")


class ConfigMapView(codec.Meta):
    data: dict[str, str] | None = None


def _record(entry: dict[str, object]) -> None:
    line = (json.dumps(entry) + "\n").encode()
    fd = os.open(os.environ["PROBE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def build(ctx: runtime.Context) -> runtime.Reconcile:
    store = ctx.caches[CONFIGMAPS]
    store.add_handler(
        on_add=lambda obj: ctx.enqueue(codec.key_of(obj.metadata)),
        on_update=lambda old, new: ctx.enqueue(codec.key_of(new.metadata)),
        on_delete=lambda obj: ctx.enqueue(codec.key_of(obj.metadata)),
    )

    async def reconcile(key: str) -> runtime.Result | None:
        start = time.time()
        obj = store.get_key(key)
        data = (obj.data if obj is not None else None) or {}
        if data.get("sleep"):
            await asyncio.sleep(float(data["sleep"]))
        entry = {"pid": os.getpid(), "key": key, "start": start, "value": data.get("value")}
        entry["exists"] = obj is not None
        entry["end"] = time.time()
        _record(entry)
        if data.get("fail") == "true":
            raise RuntimeError(f"probe told to fail on {key}")
        if data.get("fail") == "terminal":
            raise runtime.TerminalError(f"probe told to fail on {key} for good")
        return None

    return reconcile


SPEC = runtime.Spec(
    name="probe-controller",
    alias="probe",
    primary=CONFIGMAPS,
    views={CONFIGMAPS: ConfigMapView},
    build=build,
    workers=4,
)
