"""Trace context crosses a message boundary (inject, extract, child span); exporters from the env."""

from __future__ import annotations

import asyncio
import re

import pytest
from kcm_shared.base import errors, tracing
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator


def test_trace_header_names_are_the_propagators() -> None:
    # kcm_shared.bus.wire lists these among the bus's headers; the propagator writes them.
    assert TraceContextTextMapPropagator().fields == {tracing.TRACEPARENT, tracing.TRACESTATE}


def test_traceparent_round_trip_makes_a_child_in_the_same_trace() -> None:
    exporter = InMemorySpanExporter()
    tracing.setup("test", exporter=exporter)
    headers: dict[str, str] = {}
    with tracing.span("publish", resource="v1/pods") as parent:
        tracing.inject(headers)
    assert headers["traceparent"].startswith("00-")

    with tracing.span("reconcile", tracing.extract(headers), key="ns/a") as child:
        pass

    parent_ctx, child_ctx = parent.get_span_context(), child.get_span_context()
    assert child_ctx.trace_id == parent_ctx.trace_id
    assert child_ctx.span_id != parent_ctx.span_id
    finished = {s.name: s for s in exporter.get_finished_spans()}
    assert finished["reconcile"].parent is not None
    assert finished["reconcile"].parent.span_id == parent_ctx.span_id
    assert finished["publish"].attributes == {"resource": "v1/pods"}


def test_no_headers_start_a_new_trace() -> None:
    exporter = InMemorySpanExporter()
    tracing.setup("test", exporter=exporter)
    with tracing.span("first") as first:
        pass
    with tracing.span("second", tracing.extract(None)) as second:
        pass
    assert first.get_span_context().trace_id != second.get_span_context().trace_id
    assert [s.parent for s in exporter.get_finished_spans()] == [None, None]


def test_without_an_exporter_spans_still_carry_the_trace_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    tracing.setup("test")
    received: dict[str, str] = {}
    with tracing.span("publish", resource="v1/pods") as root:
        tracing.inject(received)
    assert not root.is_recording()
    root_ctx = root.get_span_context()
    assert root_ctx.is_valid and root_ctx.trace_flags.sampled
    assert received["traceparent"] == f"00-{root_ctx.trace_id:032x}-{root_ctx.span_id:016x}-01"

    sent: dict[str, str] = {}
    with tracing.span("reconcile", tracing.extract(received), key="ns/a") as child:
        tracing.inject(sent)
    child_ctx = child.get_span_context()
    assert child_ctx.trace_id == root_ctx.trace_id
    assert child_ctx.span_id != root_ctx.span_id
    assert sent["traceparent"] == f"00-{root_ctx.trace_id:032x}-{child_ctx.span_id:016x}-01"
    with tracing.span("other") as other:
        pass
    assert other.get_span_context().trace_id != root_ctx.trace_id


@pytest.mark.parametrize(
    ("env", "kinds"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_exporters_follow_the_standard_environment(env: dict[str, str], kinds: list[str]) -> None:
    processors = tracing.processors_from_env(env)
    exporters = [p.span_exporter for p in processors]  # type: ignore[attr-defined]
    kind = {OTLPSpanExporter: "otlp", ConsoleSpanExporter: "console"}
    assert [kind[type(e)] for e in exporters] == kinds
    # OTLP goes through a batch processor: exporting happens off the event loop's thread.
    assert all(
        isinstance(p, BatchSpanProcessor) for p, k in zip(processors, kinds, strict=True) if k == "otlp"
    )
    for p in processors:
        p.shutdown()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER='jaeger'"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "PROTOCOL='grpc'"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
            "grpc",
        ),
    ],
)
def test_what_cannot_be_honoured_is_a_configuration_error(env: dict[str, str], named: str) -> None:
    with pytest.raises(errors.ConfigError, match=re.escape(named)):
        tracing.processors_from_env(env)


def test_a_key_enqueued_while_applying_a_message_is_published_in_its_trace() -> None:
    tracing.setup("test", exporter=InMemorySpanExporter())
    with tracing.span("watcher.publish") as publish:
        message: dict[str, str] = {"Kcm-Event": "ADDED"}
        tracing.inject(message)
    assert tracing.current() is not None  # outside any message: the current (empty) context
    with tracing.continued_from(message):
        kept = tracing.current()  # what the runtime keeps beside the pending key
    with tracing.continued_from({"Kcm-Event": "ADDED"}):  # a message from an untraced publisher
        untraced = tracing.current()

    async def publish_work_item() -> dict[str, str]:
        headers: dict[str, str] = {}
        tracing.inject(headers)
        return headers

    async def main() -> tuple[dict[str, str], dict[str, str]]:
        with tracing.attached(kept):
            traced = asyncio.ensure_future(publish_work_item())
        with tracing.attached(untraced):
            other = asyncio.ensure_future(publish_work_item())
        return await traced, await other

    work, other = asyncio.run(main())
    with tracing.span("reconcile", tracing.extract(work)) as reconcile:
        pass
    assert reconcile.get_span_context().trace_id == publish.get_span_context().trace_id
    assert other == {}
