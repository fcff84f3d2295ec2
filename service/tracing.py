"""OpenTelemetry traces: a ``codemode.cell`` span per cell leg, a ``codemode.call`` span per host request.

The only module that imports OpenTelemetry.  Configuration is the standard ``OTEL_*`` environment,
read once at start (``TracingConfig.from_env``); ``OTEL_TRACES_EXPORTER`` defaults to ``none``, and
then no SDK is imported and no provider exists: ``NO_TRACING.enabled`` is False and the hot paths
check that one flag (or a ``None`` hook) before doing anything.  When on, the service has its own
``TracerProvider``; it is not installed as the global provider, so no library's instrumentation
starts tracing because of us.

Parenting.  A leg's parent is the W3C ``traceparent`` of the exec/wait request that ran it
(extracted by the HTTP layer and passed down as an opaque ``TraceParent``).  A leg without one
joins its cell's trace under the cell's first leg, so an unpropagated cell is still one trace; a
later leg with its own ``traceparent`` links to that first leg.  A call's parent is the leg in
which the guest made the request.  A call can outlive its leg (the cell parked while a tool ran,
or waited for the API caller): its span ends when the request settles, in whatever later leg (or
at the cell's end, outcome ``cancelled``), so its duration is the request's true duration.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .errors import ConfigError
from .log_limits import LogLimiter, limit_warnings

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

#: The parent a request brings (an OpenTelemetry ``Context``), or None: opaque to everyone else.
TraceParent: TypeAlias = "Context | None"
#: A span attribute's value (what OpenTelemetry accepts; we set no sequences).
AttributeValue: TypeAlias = str | bool | int | float
Envelope = TypeVar("Envelope", bound=Mapping[str, object])
EXPORTERS = ("otlp", "console", "none")
PROTOCOL = "http/protobuf"  # the one OTLP transport installed (opentelemetry-exporter-otlp-proto-http)
DEFAULT_SERVICE_NAME = "codemode"
#: Caller-named strings (titles, tool names) are cut to this in span attributes.
MAX_ATTRIBUTE_CHARS = 256
_PROPAGATOR = TraceContextTextMapPropagator()
#: The loggers whose warnings a request's headers cause, one per request (a ``traceparent`` over 512
#: characters, a malformed ``tracestate``): limited to a line per kind per minute (``service.log_limits``).
PROPAGATION_LOGGERS = ("opentelemetry.trace.propagation.tracecontext", "opentelemetry.trace.span")


@dataclass(frozen=True)
class TracingConfig:
    """The tracing settings of one process, from the standard ``OTEL_*`` variables."""

    exporters: tuple[str, ...] = ()  # empty: tracing off
    service_name: str | None = None  # OTEL_SERVICE_NAME; else the resource's, else "codemode"
    endpoint: str = "http://localhost:4318"  # informational: the OTLP exporter reads its own variables

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TracingConfig:
        env = os.environ if env is None else env
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return cls()
        names = tuple(n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "none").split(",") if n.strip())
        unknown = [n for n in names if n not in EXPORTERS]
        if unknown:
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER: {', '.join(map(repr, unknown))} is not supported; use otlp, console or none",
                need_param="OTEL_TRACES_EXPORTER",
            )
        if "none" in names and len(names) > 1:
            raise ConfigError(
                "OTEL_TRACES_EXPORTER: 'none' cannot be combined with other exporters",
                need_param="OTEL_TRACES_EXPORTER",
            )
        exporters = tuple(dict.fromkeys(n for n in names if n != "none"))
        if "otlp" in exporters:
            for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
                protocol = env.get(var, PROTOCOL).strip()
                if protocol != PROTOCOL:
                    raise ConfigError(
                        f"{var}: {protocol!r} is not supported; this service exports OTLP over "
                        f"{PROTOCOL} (unset it or set {PROTOCOL})",
                        need_param=var,
                    )
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
            env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
            if env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            else "http://localhost:4318/v1/traces"
        )
        return cls(exporters, env.get("OTEL_SERVICE_NAME") or None, endpoint)


class _TracedSpec(Protocol):
    @property
    def title(self) -> str | None: ...
    @property
    def tenant(self) -> str: ...


class _TracedRequests(Protocol):
    trace: CellTrace | None


class _TracedOutput(Protocol):
    @property
    def committed_bytes(self) -> int: ...


class _TracedTelemetry(Protocol):
    @property
    def legs(self) -> int: ...


class TracedCell(Protocol):
    """What a leg's span reads of its cell (``service.runtime.cell.Cell``): ids, output size, leg count."""

    @property
    def id(self) -> str: ...
    @property
    def spec(self) -> _TracedSpec: ...
    @property
    def requests(self) -> _TracedRequests: ...
    @property
    def output(self) -> _TracedOutput: ...
    @property
    def telemetry(self) -> _TracedTelemetry: ...


class Tracing:
    """The service's tracer, or nothing (``NO_TRACING``): made once at start and passed down."""

    def __init__(self, provider: TracerProvider | None = None, log_limiter: LogLimiter | None = None) -> None:
        self.provider = provider
        self.enabled = provider is not None
        self._tracer = provider.get_tracer("codemode") if provider is not None else None
        if provider is not None:  # headers are read only while tracing is on
            limit_warnings(PROPAGATION_LOGGERS, log_limiter or LogLimiter())

    # ---- incoming parents (the HTTP layer, the MCP facade) --------------------------------------

    def parent_from_scope(self, scope: Mapping[str, Any]) -> TraceParent:  # an ASGI scope
        """The parent named by an ASGI request's ``traceparent``/``tracestate`` headers, or None."""
        if not self.enabled:
            return None
        return self._parent(_PROPAGATOR.extract(scope.get("headers") or (), getter=_ASGI_HEADERS))

    def parent_from_headers(self, headers: Mapping[str, str]) -> TraceParent:
        """The parent named by a ``traceparent`` (and ``tracestate``) in a str mapping with lower-case keys
        (HTTP headers, an MCP request's ``_meta``), or None."""
        if not self.enabled:
            return None
        return self._parent(_PROPAGATOR.extract(headers))

    def headers_for(self, parent: TraceParent) -> list[tuple[bytes, bytes]]:
        """``traceparent``/``tracestate`` naming ``parent``, for a request passed on to another replica."""
        if not self.enabled or parent is None:
            return []
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=parent)
        return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in carrier.items()]

    @staticmethod
    def _parent(context: Context) -> TraceParent:
        return context if trace.get_current_span(context).get_span_context().is_valid else None

    # ---- spans -----------------------------------------------------------------------------------

    async def traced_leg(
        self, cell: TracedCell, leg: Awaitable[Envelope], parent: TraceParent, started_ns: int | None = None
    ) -> Envelope:
        """Run one leg of ``cell`` inside its ``codemode.cell`` span; calls made meanwhile become children."""
        assert self._tracer is not None
        calls: CellTrace | None = cell.requests.trace
        links: tuple[trace.Link, ...] = ()
        if calls is not None and parent is not None:
            links = (trace.Link(calls.first_leg),)  # the caller's trace, linked to the cell's own
        elif calls is not None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(calls.first_leg))
        title = cell.spec.title
        span = self._tracer.start_span(
            "codemode.cell",
            context=parent,
            links=links,
            start_time=started_ns,
            attributes={
                "codemode.tenant": _short(cell.spec.tenant),
                "codemode.cell_id": cell.id,
                **({"codemode.title": _short(title)} if title else {}),
            },
        )
        if calls is None:
            calls = cell.requests.trace = CellTrace(self._tracer, span.get_span_context())
        calls.leg = trace.set_span_in_context(span)
        output_before = cell.output.committed_bytes
        try:
            envelope = await leg
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(trace.StatusCode.ERROR, f"the service failed in this leg: {type(exc).__name__}")
            span.end()
            raise
        status, code = envelope.get("status"), envelope.get("code")
        span.set_attributes(
            {
                "codemode.status": str(status),
                "codemode.legs": cell.telemetry.legs,
                **_times(envelope.get("telemetry")),
                "codemode.output_bytes": cell.output.committed_bytes - output_before,
                **({"codemode.code": str(code)} if code else {}),
            }
        )
        if status == "failed":
            span.set_status(trace.StatusCode.ERROR, str(code))
        span.end()
        return envelope

    async def close(self) -> None:
        """Flush and stop the exporters (in a thread: an OTLP collector may be slow or away)."""
        if self.provider is not None:
            await asyncio.to_thread(self.provider.shutdown)


NO_TRACING = Tracing()


class CellTrace:
    """One cell's tracing state, kept on its ``HostRequests.trace`` from its first traced leg."""

    __slots__ = ("_tracer", "first_leg", "leg")

    def __init__(self, tracer: trace.Tracer, first_leg: trace.SpanContext) -> None:
        self._tracer = tracer
        self.first_leg = first_leg
        self.leg: Context | None = None  # the current (or last) leg's span, parent of the calls made in it

    def call(self, method: str, label: str | None) -> trace.Span:
        """Start the span of one host request, made now by the guest; ``label`` is the callable it names."""
        attributes: dict[str, AttributeValue] = {"codemode.method": _short(method)}
        if method == "tool" and label is not None:
            attributes["codemode.tool"] = _short(label)
        elif method == "mcp.call" and label is not None:
            server, _, tool = label[len("MCP.") :].partition(".")
            attributes["codemode.mcp.server"] = _short(server)
            attributes["codemode.mcp.tool"] = _short(tool)
        return self._tracer.start_span("codemode.call", context=self.leg, attributes=attributes)


def end_call(
    span: trace.Span,
    request_bytes: int,
    reply_bytes: int | None,
    reply: Mapping[str, object] | None = None,
    outcome: str | None = None,
) -> None:
    """End a host request's span: settled with ``reply`` (``{ok, error?}``), or ended by ``outcome``."""
    if outcome is None:
        outcome = _outcome(reply)
    attributes: dict[str, AttributeValue] = {"codemode.outcome": outcome, "codemode.request_bytes": request_bytes}
    if reply_bytes is not None:
        attributes["codemode.reply_bytes"] = reply_bytes
    span.set_attributes(attributes)
    if outcome != "ok":
        span.set_status(trace.StatusCode.ERROR, outcome)
    span.end()


def _times(telemetry: object) -> dict[str, float]:
    """Where the leg's time went, as its envelope's telemetry tells it (``codemode.wall_ms``, ...)."""
    if not isinstance(telemetry, dict):
        return {}
    keys = ("wall_ms", "guest_cpu_ms", "tool_wait_ms", "tool_wait_total_ms")
    return {f"codemode.{key}": float(telemetry[key]) for key in keys if isinstance(telemetry.get(key), int | float)}


def _outcome(reply: Mapping[str, object] | None) -> str:
    """``ok``, or the code of the guest's error (``tool_error``, ``program_data_budget``, ...)."""
    if reply is None:
        return "error"
    if reply.get("ok"):
        return "ok"
    error = reply.get("error")
    return _short(str(error.get("code") or "error")) if isinstance(error, dict) else "error"


# ---- set-up -------------------------------------------------------------------------------------


def start_tracing(config: TracingConfig) -> Tracing:
    """The tracing ``config`` asks for: ``NO_TRACING`` (nothing imported, no provider) or an SDK provider
    exporting in batches.  Endpoint, headers, timeouts, sampler and batching are the SDK's own
    ``OTEL_*`` variables, read here, once."""
    if not config.exporters:
        return NO_TRACING
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporters: list[SpanExporter] = []
    for name in config.exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        else:  # stdout carries `codemode exec`'s envelope and the MCP stdio protocol
            exporters.append(ConsoleSpanExporter(out=sys.stderr))
    provider = _provider(config)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider)


def tracing_to(
    exporter: SpanExporter,
    config: TracingConfig = TracingConfig(),
    *,
    batch: bool = False,
    log_limiter: LogLimiter | None = None,
) -> Tracing:
    """Tracing into ``exporter``: each span as it ends (tests: the SDK's ``InMemorySpanExporter``), or
    in batches from a background thread like ``start_tracing`` (``batch=True``, the benchmark)."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = _provider(config)
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return Tracing(provider, log_limiter)


def _provider(config: TracingConfig) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME; unnamed, we are "codemode".
    resource = Resource.create({"service.name": config.service_name} if config.service_name else None)
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    return TracerProvider(resource=resource)


# ---- helpers ------------------------------------------------------------------------------------


class _AsgiHeaders(Getter[Iterable[tuple[bytes, bytes]]]):
    """Reads header values from an ASGI scope's raw ``(name, value)`` list (names are lower case)."""

    def get(self, carrier: Iterable[tuple[bytes, bytes]], key: str) -> list[str] | None:
        name = key.encode("latin-1")
        values = [value.decode("latin-1") for n, value in carrier if n == name]
        return values or None

    def keys(self, carrier: Iterable[tuple[bytes, bytes]]) -> list[str]:
        return [n.decode("latin-1") for n, _ in carrier]


_ASGI_HEADERS = _AsgiHeaders()


def _short(text: str) -> str:
    return text if len(text) <= MAX_ATTRIBUTE_CHARS else text[:MAX_ATTRIBUTE_CHARS] + "…"
