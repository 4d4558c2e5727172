"""OpenTelemetry traces across watcher -> NATS -> controller -> API write.

Each service calls `setup(service)` once at start-up. The watcher wraps the publication of
an object change in a `span` and `inject`s its W3C `traceparent` into the message headers;
a controller `extract`s it from the headers and opens its reconcile span as a child, so one
trace follows a change from the API server to the write it caused.

The exporter is chosen like the OpenTelemetry SDK's own autoconfiguration, by
`OTEL_TRACES_EXPORTER`: `console` prints finished spans; `none` or unset exports nothing,
but spans are still created so trace context keeps propagating to the next hop.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger("kcm.tracing")

_propagator = TraceContextTextMapPropagator()
_provider: TracerProvider | None = None
_cached_tracer: trace.Tracer | None = None


def setup(service: str, exporter: SpanExporter | None = None) -> TracerProvider:
    """Install a TracerProvider for `service`; `exporter` overrides OTEL_TRACES_EXPORTER (tests).

    Calling it again replaces this module's provider (the process-wide OpenTelemetry one can
    be set only once, so spans made here always use the provider of the latest call).
    """
    global _provider, _cached_tracer
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if exporter is None:
        exporter = _exporter_from_env()
    if exporter is not None:
        # Synchronous export suits the console exporter; a network exporter would need
        # a BatchSpanProcessor so that exporting never blocks the event loop.
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if _provider is None:
        trace.set_tracer_provider(provider)
    _provider = provider
    # get_tracer builds a new Tracer each call; one per provider is enough (hot path: a span
    # per reconcile and per published batch).
    _cached_tracer = provider.get_tracer("kcm")
    return provider


def _exporter_from_env() -> SpanExporter | None:
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    if choice == "console":
        return ConsoleSpanExporter()
    if choice not in ("", "none"):
        log.warning("unsupported OTEL_TRACES_EXPORTER, traces are not exported", extra={"exporter": choice})
    return None


def _tracer() -> trace.Tracer:
    if _cached_tracer is not None:
        return _cached_tracer
    return trace.get_tracer("kcm")  # no setup: non-recording spans, nothing propagates


def inject(headers: dict[str, str]) -> None:
    """Write the current span's W3C `traceparent` (and `tracestate`) into `headers`."""
    _propagator.inject(headers)


def extract(headers: Mapping[str, str] | None) -> Context:
    """The trace context carried by `headers` (an empty context when they carry none)."""
    return _propagator.extract(dict(headers or {}))


@contextlib.contextmanager
def span(name: str, context: Context | None = None, **attributes: Any) -> Iterator[trace.Span]:
    """A current span named `name`, child of `context` (from `extract`) or of the current span."""
    with _tracer().start_as_current_span(name, context=context, attributes=attributes) as current:
        yield current
