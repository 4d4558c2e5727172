"""Trace context crosses a message boundary: inject into headers, extract, child span."""

from __future__ import annotations

from kcm_shared import tracing
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


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
