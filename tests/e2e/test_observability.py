"""Traces leave the process over OTLP, and a watcher that cannot publish shows failing.

One bus stack (apiserver, nats-server, watcher, coordinator, probe controller) for the
module, every process started with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a real OTLP/HTTP
receiver run by the test (aiohttp, decoding the protobuf with opentelemetry-proto).
"""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import nats
import pytest
from aiohttp import web
from kcm_shared.bus import wire
from nats.js import api
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.conftest import KCM, ApiServer, NatsProc, start_apiserver, start_nats, wait_for
from tests.e2e.bus_stack import ADMIN, Proc, Stack, wait_owned


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    attributes: dict[str, str]


class Receiver:
    """An OTLP/HTTP trace receiver on loopback, in a thread of its own."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _export(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = trace_service_pb2.ExportTraceServiceRequest()
        export.ParseFromString(body)
        got = []
        for resource_spans in export.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {kv.key: kv.value.string_value for kv in span.attributes}
                    got.append(Span(resource["service.name"], span.name, span.trace_id.hex(), attributes))
        with self._lock:
            self.spans.extend(got)
        response = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=response, content_type="application/x-protobuf")

    def find(self, service: str, name: str, **attributes: str) -> list[Span]:
        with self._lock:
            return [
                s
                for s in self.spans
                if s.service == service
                and s.name == name
                and all(s.attributes.get(k) == v for k, v in attributes.items())
            ]

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@dataclass
class Observed:
    stack: Stack
    receiver: Receiver
    coordinator: Proc


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    workdir = tmp_path_factory.mktemp("observed")
    receiver = Receiver()
    api_server: ApiServer = start_apiserver(workdir / "api")
    nats_server: NatsProc = start_nats(workdir)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    stack = Stack(api_server, nats_server, workdir, workdir / "probe.jsonl", env=env)
    try:
        # A short failure limit, so a lane that cannot publish shows within the test.
        stack.watcher("watcher-0", "--publish-failure-limit", "1s")
        coordinator = stack.coordinator()
        stack.probe("probe-a")
        wait_owned(stack, coordinator, 1)
        yield Observed(stack, receiver, coordinator)
    finally:
        stack.stop()
        nats_server.stop()
        api_server.stop()
        receiver.stop()


def test_one_change_is_one_trace_from_the_watcher_to_the_reconcile(observed: Observed) -> None:
    stack, receiver = observed.stack, observed.receiver
    stack.api.kubectl("create", "namespace", "traces")
    # Once a first change is reconciled, the replica's start-up (which enqueues every key it
    # holds, in no trace) is over.
    stack.api.kubectl("create", "configmap", "first", "-n", "traces")
    wait_for(lambda: any(r["key"] == "traces/first" for r in stack.records()), 30, what="a first reconcile")
    stack.api.kubectl("create", "configmap", "changed", "-n", "traces", "--from-literal=value=1")
    [published] = wait_for(
        lambda: receiver.find("watcher", "watcher.publish", key="traces/changed"), 30, what="the publish span"
    )

    def reconciled_in_that_trace() -> list[Span]:
        spans = receiver.find("controllers", "reconcile", key="traces/changed")
        return [span for span in spans if span.trace_id == published.trace_id]

    wait_for(reconciled_in_that_trace, 30, what=f"a reconcile span in trace {published.trace_id}")


async def _limit_new_subjects(nats_url: str, admin_seed: str, limited: bool) -> None:
    """Make the object stream refuse messages on new subjects (or accept them again)."""
    nc = await nats.connect(nats_url, nkeys_seed=admin_seed)
    try:
        js = nc.jetstream()
        info = await js.stream_info(wire.OBJECTS_STREAM)
        config = info.config
        config.max_msgs = info.state.messages if limited else -1
        config.discard = api.DiscardPolicy.NEW if limited else api.DiscardPolicy.OLD
        await js.update_stream(config)
    finally:
        await nc.close()


def test_a_watcher_that_cannot_publish_is_failing_until_it_can(observed: Observed) -> None:
    stack, coordinator = observed.stack, observed.coordinator
    wait_for(lambda: coordinator.get("/healthz/watcher") == (200, "ok"), 30, what="a healthy watcher")
    api_server = stack.api
    api_server.kubectl("create", "namespace", "stuck")
    asyncio.run(_limit_new_subjects(stack.nats.url, stack.seed(ADMIN), True))
    try:
        api_server.kubectl("create", "configmap", "refused", "-n", "stuck")

        def failing() -> str | None:
            code, text = coordinator.get("/healthz/watcher")
            return text if code == 500 and "v1/configmaps" in text else None

        text = wait_for(failing, 30, what="the watcher failing")
        assert "publishing" in text, text
        url = f"http://127.0.0.1:{coordinator.ops_port}"
        done = subprocess.run([KCM, "status", "--url", url], capture_output=True, text=True, timeout=30)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "failing: core/v1/configmaps" in done.stdout, done.stdout
    finally:
        asyncio.run(_limit_new_subjects(stack.nats.url, stack.seed(ADMIN), False))
    wait_for(lambda: coordinator.get("/healthz/watcher") == (200, "ok"), 30, what="healthy again")
    # Nothing was lost meanwhile: the refused change reached the controller.
    wait_for(lambda: any(r["key"] == "stuck/refused" for r in stack.records()), 30, what="the change")
