"""Traces with OpenTelemetry: on when ``OTEL_TRACES_EXPORTER`` names an exporter.

:func:`setup` runs at every process start (``PlatformSiteConfig.ready``): with
``OTEL_TRACES_EXPORTER=otlp`` (OTLP over HTTP) or ``console`` it installs the SDK's tracer
provider (resource and sampler from the standard ``OTEL_*`` variables, service name
``a2a-platform`` unless ``OTEL_SERVICE_NAME`` says otherwise) and instruments Django,
Celery and httpx; httpx then sends W3C ``traceparent`` on every call. The plain calls to
agents, which go over urllib3 (``agent_profiles.guarded_pool``), get the same client span
and header from :func:`client_span`. Without it nothing is installed and the helpers below
cost next to nothing.

A platform task is one trace across processes: its context is stored on the task
(:func:`context_of` / :func:`carrier`), and each process acting on the task later opens
its span under it (:func:`task_span`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject

log = logging.getLogger(__name__)

TRACER = "a2a-platform"
_enabled = False
_provider: Any = None  # the SDK's provider, once installed (a process has one)


def enabled() -> bool:
    return _enabled


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # One line per span (the SDK's default indents its JSON over many): a line among
        # the log's lines, a JSON object like them with LOG_FORMAT=json.
        return ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + os.linesep)
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, headers, ...
    # settings.py refuses others at the start, in one line: this is for a direct caller.
    raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: use otlp, console or none")


def setup(exporter: Any = None, *, batch: bool = True) -> bool:
    """Install tracing once per process when ``OTEL_TRACES_EXPORTER`` names an exporter
    (or an ``exporter`` is given, as tests do). Returns whether tracing is on."""
    global _enabled, _provider
    if _enabled:
        return True
    name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter is None and name in ("", "none"):
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    os.environ.setdefault("OTEL_SERVICE_NAME", "a2a-platform")
    # Headers an operator chooses to capture (OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_*)
    # go out as [REDACTED] when they carry a credential: an exported span is a log line.
    os.environ.setdefault("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS", SANITIZED)
    if _provider is None:
        sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else _default_sampler()
        _provider = TracerProvider(resource=Resource.create(), sampler=sampler)
        trace.set_tracer_provider(_provider)
    exporter = exporter if exporter is not None else _exporter(name)
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    _provider.add_span_processor(processor)
    _instrument()
    _enabled = True
    log.info("tracing on: %s exporter", name or type(exporter).__name__)
    return True


def _default_sampler() -> Any:
    """Every trace, except the beat's periodic sweeps (one a second in the embedded mode,
    each an empty trace): spans of the work they find join that work's task trace."""
    from django.conf import settings
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_ON,
        Decision,
        ParentBased,
        Sampler,
        SamplingResult,
    )

    periodic = {str(entry["task"]) for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    class SkipPeriodic(Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any
        ) -> SamplingResult:
            if name.split("/", 1)[-1] in periodic:
                return SamplingResult(Decision.DROP)
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, *args, **kwargs)

        def get_description(self) -> str:
            return "SkipPeriodic"

    return ParentBased(root=SkipPeriodic())


# The default of OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS: the headers
# the platform and its peers authenticate with (callers', agents', webhooks', OAuth's).
SANITIZED = (
    "authorization,proxy-authorization,cookie,set-cookie,x-csrftoken,"
    "x-a2a-notification-token,.*token.*,.*secret.*,.*key.*,.*auth.*,.*session.*"
)
# The attributes the instrumentations write a whole URL into (old and stable semantic
# conventions): its query string may hold a secret (a key a caller put there anyway, a
# webhook receiver's ``?token=``), which the instrumentations redact only for a few
# cloud signatures.
_URL_ATTRIBUTES = ("http.url", "url.full", "http.target")


def _without_query(url: str) -> str:
    """``url`` without its query string and fragment."""
    parts = urlsplit(url)
    if not parts.query and not parts.fragment:
        return url
    return urlunsplit(parts._replace(query="", fragment=""))


def _strip_queries(span: Any, *_: Any) -> None:
    """The request hook of the Django and httpx instrumentations: the span's URLs without
    their query (the hooks run once the span holds the request's attributes)."""
    if span is None or not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    for name in _URL_ATTRIBUTES:
        value = attributes.get(name)
        if isinstance(value, str) and value != _without_query(value):
            span.set_attribute(name, _without_query(value))
    if attributes.get("url.query"):
        span.set_attribute("url.query", "[REDACTED]")


async def _strip_queries_async(span: Any, *_: Any) -> None:
    _strip_queries(span)


def _instrument() -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    DjangoInstrumentor().instrument(is_sql_commentor_enabled=False, request_hook=_strip_queries)
    CeleryInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument(
        request_hook=_strip_queries, async_request_hook=_strip_queries_async
    )


def teardown() -> None:
    """Undo :func:`setup`'s instrumentation (tests that switched tracing on switch it off;
    the provider stays, as OpenTelemetry allows one per process)."""
    global _enabled
    if not _enabled:
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    DjangoInstrumentor().uninstrument()
    CeleryInstrumentor().uninstrument()
    HTTPXClientInstrumentor().uninstrument()
    _enabled = False


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


@contextmanager
def client_span(method: str, url: str, headers: dict[str, str]) -> Iterator[Any]:
    """A CLIENT span around an HTTP call that httpx's instrumentation does not see, its
    context added to ``headers`` (``traceparent``), as the instrumentation would. Yields
    the span (None when tracing is off) for the caller to record the answer's status."""
    if not _enabled:
        yield None
        return
    attributes = {"http.request.method": method, "url.full": _without_query(url)}
    with tracer().start_as_current_span(
        method, kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        inject(headers)
        yield span


@contextmanager
def server_span(scope: dict[str, Any], route: str) -> Iterator[Any]:
    """A SERVER span around an ASGI request that skips Django's middleware, and so the
    Django instrumentation's span (the A2A face, the tasks API's Bearer calls): in the
    caller's trace when it sent ``traceparent``, so the tasks it creates (new traces,
    :func:`new_trace`) link to it. ``route`` names the span (not the path: task ids in
    paths would make every span name unique). Callers check :func:`enabled` first."""
    headers = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope.get("headers") or []
        if name in (b"traceparent", b"tracestate")
    }
    method = scope.get("method", "")
    attributes = {"http.request.method": method, "url.path": scope.get("path", "")}
    with tracer().start_as_current_span(
        f"{method} {route}",
        context=extract(headers),
        kind=trace.SpanKind.SERVER,
        attributes=attributes,
    ) as current:
        yield current


def carrier() -> dict[str, str]:
    """The current span's context as W3C headers (``traceparent``, ``tracestate``)."""
    headers: dict[str, str] = {}
    inject(headers)
    return headers


@contextmanager
def span(
    name: str, parent: dict[str, str] | None = None, **attributes: Any
) -> Iterator[trace.Span | None]:
    """A span under ``parent`` (a stored carrier) or the current one; nothing when off."""
    if not _enabled:
        yield None
        return
    ctx = extract(parent) if parent else None
    attrs = {k.replace("__", "."): v for k, v in attributes.items() if v not in (None, "")}
    with tracer().start_as_current_span(name, context=ctx, attributes=attrs) as current:
        yield current


@contextmanager
def new_trace(name: str, **attributes: Any) -> Iterator[trace.Span | None]:
    """A root span (a new trace), linked to the current span (e.g. the request)."""
    if not _enabled:
        yield None
        return
    current = trace.get_current_span().get_span_context()
    links = [trace.Link(current)] if current.is_valid else []
    attrs = {k.replace("__", "."): v for k, v in attributes.items() if v not in (None, "")}
    token = otel_context.attach(otel_context.Context())  # no parent: a new trace
    try:
        with tracer().start_as_current_span(name, links=links, attributes=attrs) as root:
            yield root
    finally:
        otel_context.detach(token)
