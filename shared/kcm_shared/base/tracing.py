"""OpenTelemetry traces across watcher -> NATS -> controller -> API write.

Each service calls `setup(service)` once at start-up. The watcher wraps the publication of
an object change in a `span` and `inject`s its W3C `traceparent` into the message headers;
a controller's cache applies the message `continued_from` its headers, the runtime keeps
the `current` context of each key its handlers enqueue and publishes the work item
`attached` to it (its `traceparent` again), and the work queue `extract`s that to open the
reconcile span as a child, so one trace follows a change from the API server to the write
it caused.

The exporters are chosen like the OpenTelemetry SDK's own autoconfiguration, by
`OTEL_TRACES_EXPORTER` (a comma-separated list): `otlp` sends spans over OTLP/HTTP with
protobuf (the maintained `opentelemetry-exporter-otlp-proto-http`, which reads
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS`,
`..._TIMEOUT` and the rest of the standard variables itself); `console` prints finished
spans; `none` exports nothing. Unset, it is `otlp` when an OTLP endpoint is set and `none`
otherwise (the SDK would default to `otlp` at localhost, which spams errors when nothing
listens there). Spans are created in every case, so trace context keeps propagating to the
next hop. A value this module cannot honour (an unknown exporter, the `grpc` protocol) is a
configuration error: `setup` raises `errors.ConfigError`, which names the variable.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kcm_shared.base import errors

TraceContext = Context  # for modules with a `Context` of their own
# The W3C trace context headers `_propagator` writes and reads; `kcm_shared.bus.wire` lists
# them among the bus's headers (it sits above this layer, so the names live here).
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_propagator = TraceContextTextMapPropagator()
_carried: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "kcm_carried", default=None
)
_provider: TracerProvider | None = None
_cached_tracer: trace.Tracer | None = None
# False when the provider exports nowhere: spans then only carry ids to the next hop (below).
_recording = True
_ids = RandomIdGenerator()

EXIT_FLUSH = 2.0  # seconds
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def setup(service: str, exporter: SpanExporter | None = None) -> TracerProvider:
    """Install a TracerProvider for `service`; `exporter` overrides the OTEL_* environment (tests).

    Calling it again replaces this module's provider (the process-wide OpenTelemetry one can
    be set only once, so spans made here always use the provider of the latest call).
    """
    global _provider, _cached_tracer, _recording
    processors = [SimpleSpanProcessor(exporter)] if exporter is not None else processors_from_env()
    # Not the SDK's own exit hook: with the collector unreachable it retries for ~8 s.
    provider = TracerProvider(resource=Resource.create({"service.name": service}), shutdown_on_exit=False)
    for processor in processors:
        provider.add_span_processor(processor)
    if _provider is None:
        trace.set_tracer_provider(provider)
        atexit.register(_shutdown_at_exit)
    _provider = provider
    _recording = bool(processors)
    # get_tracer builds a new Tracer each call; one per provider is enough (hot path: a span
    # per reconcile and per published batch).
    _cached_tracer = provider.get_tracer("kcm")
    return provider


def _shutdown_at_exit() -> None:
    """Send the last spans, but let a stopping service wait no more than EXIT_FLUSH for it."""
    if _provider is None:
        return
    # A daemon thread: what the collector has not taken by then is dropped at exit.
    flushing = threading.Thread(target=_provider.shutdown, name="kcm-trace-flush", daemon=True)
    flushing.start()
    flushing.join(EXIT_FLUSH)


def processors_from_env(env: Mapping[str, str] | None = None) -> list[SpanProcessor]:
    """The span processors OTEL_TRACES_EXPORTER (and the OTLP variables) ask for."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    default = "otlp" if any(env.get(name, "").strip() for name in _ENDPOINTS) else "none"
    chosen = [c.strip().lower() for c in env.get("OTEL_TRACES_EXPORTER", default).split(",") if c.strip()]
    processors: list[SpanProcessor] = []
    for choice in chosen:
        if choice == "none":
            continue
        if choice == "console":
            # Synchronous: the console is local and a test wants each span as it ends.
            processors.append(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif choice == "otlp":
            # Batched, exported from the processor's own thread: never blocks the event loop.
            processors.append(BatchSpanProcessor(_otlp_exporter(env)))
        else:
            raise errors.ConfigError(
                f"OTEL_TRACES_EXPORTER={choice!r} is not supported (otlp, console or none)"
            )
    return processors


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = next((env[name].strip() for name in _PROTOCOLS if env.get(name, "").strip()), "http/protobuf")
    if protocol != "http/protobuf":
        raise errors.ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: use http/protobuf "
            "(an OTLP collector's port 4318)"
        )
    # Imported here: it pulls in protobuf and requests, which a process not exporting never needs.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


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


def current() -> Context:
    """The trace context to resume later with `attached` (e.g. in another task): that of the
    message being applied (`continued_from`) if any, else the current one."""
    return later().context()


@contextlib.contextmanager
def attached(context: Context) -> Iterator[None]:
    """Make `context` current inside the block; tasks created there carry it with them."""
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


class continued_from:
    """Inside the block, `current()` is the trace `headers` carry (when they carry one).

    A cache applies each message in it, so the keys its event handlers enqueue continue the
    change's trace. Lazy: the headers are parsed only if something asks (a hot path, and most
    messages enqueue nothing). A class, not a generator: it runs once per cached event."""

    __slots__ = ("_headers", "_token")

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def __enter__(self) -> None:
        self._token = _carried.set(self._headers)

    def __exit__(self, *exc: object) -> None:
        _carried.reset(self._token)


class Later:
    """The trace context to resume later, parsed only when `context()` is called.

    What `later()` returns: a key enqueued by many events (a Job's, by each of its pods')
    keeps only the last one's until it is published, so most are never parsed."""

    __slots__ = ("_carried", "_context")

    def __init__(self, carried: Mapping[str, str] | None, context: Context | None) -> None:
        self._carried = carried
        self._context = context

    def context(self) -> Context:
        if self._context is None:
            self._context = extract(self._carried)
        return self._context


def later() -> Later:
    """`current()`, its headers left unparsed until `Later.context()` asks."""
    carried = _carried.get()
    if carried is not None and TRACEPARENT in carried:
        return Later(carried, None)
    return Later(None, otel_context.get_current())


@contextlib.contextmanager
def span(name: str, context: Context | None = None, **attributes: Any) -> Iterator[trace.Span]:
    """A current span named `name`, child of `context` (from `extract`) or of the current span.

    With no exporter set up the span is a bare context (ids, no name, attributes nor times):
    the next hop still continues the trace, and the SDK's span bookkeeping, a share of every
    reconcile's and every published change's cost, is spared where nothing would read it."""
    if _recording or _cached_tracer is None:
        with _tracer().start_as_current_span(name, context=context, attributes=attributes) as current:
            yield current
        return
    parent = trace.get_current_span(context).get_span_context()
    if parent.is_valid:
        trace_id, flags, state = parent.trace_id, parent.trace_flags, parent.trace_state
    else:  # a new trace, sampled as the SDK's default sampler would have it
        trace_id, flags, state = _ids.generate_trace_id(), trace.TraceFlags(trace.TraceFlags.SAMPLED), None
    bare = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id, _ids.generate_span_id(), is_remote=False, trace_flags=flags, trace_state=state
        )
    )
    token = otel_context.attach(trace.set_span_in_context(bare, context))
    try:
        yield bare
    finally:
        otel_context.detach(token)
