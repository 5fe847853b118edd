"""streamfix: one OpenTelemetry span per finished turn, in the GenAI semantic conventions.

Each turn the client leg finishes (HTTP or WebSocket, the record :func:`addons.shared.
turn_finished` hands to every sink) becomes one span ``{operation} {model}`` of kind CLIENT
with the attributes of the GenAI conventions' inference span (``gen_ai.client.inference``
in open-telemetry/semantic-conventions-genai v0.1.0; the same names as semantic-conventions
v1.37+): what the client asked (model, cap, stream), what it was told (response id and
model, finish reasons, usage with cache and reasoning counts, time to first chunk), the
gateway as ``server.address``/``server.port``, ``error.type`` on a failure; and, under
``streamfix.``, what was repaired, the gateway's own ending, the verdict and its evidence.
When the upstream leg saw the provider's call, it is a child span with the provider's name
(``gen_ai.provider.name``), model, usage and finish.

The conventions are still Development. streamfix never emitted an older version (v1.36 or
before), so it emits these whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` holds
``gen_ai_latest_experimental`` or not. No key, prompt or output text goes into a span: the
key appears as its id or label (the turn log's), and the content capture switch
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``) is not taken (a log line says so).

Configured the standard way: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT`` turn it on (``_HEADERS``, ``_TIMEOUT``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` as the SDK reads them),
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` off; the option
``streamfix_traces`` overrides them (``off``, or the traces endpoint's URL). OTLP over
HTTP/protobuf with the OpenTelemetry SDK, batched: a span is queued when its turn ends and
a thread of the SDK's sends it, never on a stream's path. A receiver that does not answer
costs one log line (and one when it answers again); its spans are dropped.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlsplit

from mitmproxy import ctx, exceptions

from . import shared

logger = logging.getLogger("streamfix.traces")

OPERATION = {"chat": "chat", "responses": "chat", "messages": "chat", "gemini": "generate_content"}
"""Client API -> ``gen_ai.operation.name``."""
API_PROVIDER = {"chat": "openai", "responses": "openai", "messages": "anthropic", "gemini": "gcp.gemini"}
"""Client API -> ``gen_ai.provider.name`` of the client span: the API the gateway speaks
(the conventions: "the instrumentation's best knowledge"; the real provider is the child's)."""
PROVIDER = {
    "gemini": "gcp.gemini",
    "interactions": "gcp.gemini",
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "responses": "openai",
    "devin": "devin",
}
"""Upstream leg's provider key (wire/upstream_call.py) -> ``gen_ai.provider.name``."""
FAILED = ("upstream_error", "failed_open", "client_abort", "draining")
"""Turn endings (addons/turn.py ``ENDINGS``) that are errors: ``error.type`` is the HTTP
status when the gateway answered with one, else the ending's name."""
USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_write.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}
"""The turn record's token names -> the conventions' (input includes the cache, output the reasoning)."""


def _ns(iso: str | None, less_ms: int | None = None) -> int | None:
    if not iso:
        return None
    t = datetime.fromisoformat(iso).timestamp()
    return round((t - (less_ms or 0) / 1000) * 1e9)


def _usage(attrs: dict[str, Any], counts: Any) -> None:
    for k, name in USAGE.items():
        v = counts.get(k) if isinstance(counts, dict) else None
        if isinstance(v, int) and (v or k in ("input_tokens", "output_tokens")):
            attrs[name] = v


def _put(attrs: dict[str, Any], name: str, value: Any) -> None:
    if value is not None and value != [] and value != "":
        attrs[name] = value


def client_span(rec: dict[str, Any]) -> dict[str, Any]:
    """The client span of one turn record (addons/turn.py ``Turn.record``): ``name``,
    ``start``/``end`` (ns since the epoch), ``attributes``, ``error`` (the status
    description, None when the turn did not fail)."""
    api = rec.get("api") or ""
    op = OPERATION.get(api, "chat")
    model = rec.get("model")
    a: dict[str, Any] = {"gen_ai.operation.name": op, "gen_ai.provider.name": API_PROVIDER.get(api, "openai")}
    _put(a, "gen_ai.request.model", model)
    response = rec.get("response") or {}
    _put(a, "gen_ai.response.model", response.get("model"))
    _put(a, "gen_ai.response.id", response.get("id"))
    finish = rec.get("finish") or {}
    ended = rec.get("ended")
    told = finish.get("client")
    if ended in FAILED and ended != "draining":
        told = ["error"]  # the conventions: a generation that ended abnormally reads "error"
    _put(a, "gen_ai.response.finish_reasons", told)
    _usage(a, (rec.get("tokens") or {}).get("client"))
    _put(a, "gen_ai.request.max_tokens", rec.get("max_tokens"))
    streaming = rec.get("transport") in ("sse", "websocket")
    if streaming:
        a["gen_ai.request.stream"] = True
        if rec.get("ttfb_ms") is not None:
            a["gen_ai.response.time_to_first_chunk"] = rec["ttfb_ms"] / 1000
    gateway = rec.get("gateway")
    if gateway:
        host, _, port = gateway.rpartition(":")
        a["server.address"] = host.strip("[]")
        if port.isdigit():
            a["server.port"] = int(port)
    status = rec.get("status")
    if isinstance(status, int):
        a["http.response.status_code"] = status
    error = None
    if ended in FAILED:
        a["error.type"] = str(status) if isinstance(status, int) and status >= 400 else str(ended)
        error = rec.get("error") or str(ended)
    # streamfix's own: what it did and why
    _put(a, "streamfix.api", api)
    _put(a, "streamfix.transport", rec.get("transport"))
    _put(a, "streamfix.ended", ended)
    _put(a, "streamfix.flow", rec.get("flow"))
    _put(a, "streamfix.key", rec.get("key"))
    _put(a, "streamfix.worker", rec.get("worker"))
    _put(a, "streamfix.gateway.finish_reasons", finish.get("gateway"))
    rules = {k: v for k, v in (rec.get("rules") or {}).items() if k != "changed"}
    _put(a, "streamfix.repaired", sorted(rules))
    if rules:
        a["streamfix.repaired.events"] = sum(rules.values())
    verdict = rec.get("verdict")
    if verdict:
        a["streamfix.verdict"] = verdict.get("outcome")
        _put(a, "streamfix.verdict.evidence", [f"{e['source']}: {e['detail']}" for e in verdict.get("evidence", [])])
    _put(a, "streamfix.violations", sorted(rec.get("violations") or {}))
    _put(a, "streamfix.error", rec.get("error"))
    end = _ns(rec.get("time"))
    return {
        "name": f"{op} {model}" if model else op,
        "start": _ns(rec.get("time"), rec.get("duration_ms")),
        "end": end,
        "attributes": a,
        "error": error,
    }


def provider_span(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The child span of the provider's call the upstream leg linked to the turn, if any."""
    call = rec.get("upstream_call")
    if not call:
        return None
    provider = call.get("provider") or ""
    op = "generate_content" if provider in ("gemini", "interactions") else "chat"
    model = rec.get("upstream_model")
    a: dict[str, Any] = {"gen_ai.operation.name": op, "gen_ai.provider.name": PROVIDER.get(provider, provider)}
    _put(a, "gen_ai.response.model", model)
    failed = bool(call.get("failed"))
    finish = ["error"] if failed else [call["finish"]] if call.get("finish") else None
    _put(a, "gen_ai.response.finish_reasons", finish)
    _usage(a, (rec.get("tokens") or {}).get("upstream"))
    if failed:
        a["error.type"] = "upstream_error"
    _put(a, "streamfix.flow", call.get("flow"))
    _put(a, "streamfix.provider.finish", call.get("finish"))
    return {
        "name": f"{op} {model}" if model else op,
        "start": _ns(call.get("started")),
        "end": _ns(call.get("started"), -(call.get("duration_ms") or 0)),
        "attributes": a,
        "error": "the provider's call failed" if failed else None,
    }


# --- configuration ------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamfix")
    except PackageNotFoundError:
        return "unknown"


def _env_on() -> str | None:
    """Why the environment turns traces on (the variable that does), or None."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if os.environ.get(name, "").strip():
            return name
    return None


def check_traces(value: str) -> None:
    """``streamfix_traces``: empty (the environment decides), ``off`` or an http(s) URL."""
    if value in ("", "off"):
        return
    u = urlsplit(value)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise exceptions.OptionsError(
            f"streamfix_traces={value}: give the OTLP/HTTP traces endpoint's URL "
            "(e.g. http://127.0.0.1:4318/v1/traces), off, or nothing to follow OTEL_EXPORTER_OTLP_ENDPOINT"
        )


CHECKS = {"streamfix_traces": check_traces}
"""This addon's value checks (addons/options.py runs them before anything listens)."""


class Traces:
    """Exports a span per finished turn (see the module docstring)."""

    def __init__(self) -> None:
        self.provider: Any = None
        self.tracer: Any = None
        self.exporter: _Exporter | None = None
        self.where = ""

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_traces",
            str,
            "",
            "OpenTelemetry traces, one span per turn in the GenAI semantic conventions, over "
            "OTLP/HTTP: empty follows the environment (on when OTEL_EXPORTER_OTLP_ENDPOINT or "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, off with OTEL_SDK_DISABLED=true), off, "
            "or the traces endpoint's URL (http://127.0.0.1:4318/v1/traces).",
        )

    def configure(self, updated: set[str]) -> None:
        if "streamfix_traces" not in updated:
            return
        value = ctx.options.streamfix_traces
        check_traces(value)
        self._stop()
        why = None if value == "off" else "streamfix_traces" if value else _env_on()
        if why is not None:
            self._start(value or None, why)

    def _start(self, endpoint: str | None, why: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        resource = Resource.create({})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: "streamfix"}))
        inner = OTLPSpanExporter(endpoint=endpoint)
        self.where = getattr(inner, "_endpoint", endpoint or "")
        # the SDK's exporter and batch worker log every failed batch (with retries); the
        # wrapper says it once (and once when the receiver answers again)
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        self.exporter = _Exporter(inner, self.where)
        self.provider = TracerProvider(resource=resource)
        # _Exporter has SpanExporter's three methods; subclassing it would import the SDK
        # whenever the addon loads, traces on or off
        self.provider.add_span_processor(BatchSpanProcessor(cast(SpanExporter, self.exporter)))
        self.tracer = self.provider.get_tracer("streamfix", _version())
        shared.add_turn_sink(self.export)
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        extra = ""
        if protocol and protocol != "http/protobuf":
            extra = f"; OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: streamfix sends http/protobuf"
        if os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in ("true", "1"):
            extra += (
                "; OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is not taken: no prompt or output text in spans"
            )
        service = self.provider.resource.attributes.get(SERVICE_NAME)
        logger.info(f"streamfix: traces: a span per turn to {self.where} as {service} (from {why}){extra}")

    def export(self, rec: dict[str, Any]) -> None:
        """A turn sink: the turn's span (and its provider call's), queued for the exporter."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        tracer = self.tracer
        if tracer is None:
            return
        parts = client_span(rec)
        span = tracer.start_span(parts["name"], kind=SpanKind.CLIENT, start_time=parts["start"],
                                 attributes=parts["attributes"])  # fmt: skip
        if parts["error"]:
            span.set_status(Status(StatusCode.ERROR, parts["error"]))
        child = provider_span(rec)
        if child is not None:
            c = tracer.start_span(child["name"], context=trace.set_span_in_context(span), kind=SpanKind.CLIENT,
                                  start_time=child["start"], attributes=child["attributes"])  # fmt: skip
            if child["error"]:
                c.set_status(Status(StatusCode.ERROR, child["error"]))
            c.end(end_time=child["end"])
        span.end(end_time=parts["end"])

    def _stop(self, wait: float = 3.0) -> None:
        """Stop exporting; the spans still queued get ``wait`` seconds to leave (a receiver
        that does not answer never holds the sidecar's exit longer)."""
        shared.remove_turn_sink(self.export)
        provider, self.provider, self.tracer = self.provider, None, None
        if provider is None:
            return
        t = threading.Thread(target=provider.shutdown, name="streamfix-traces-shutdown", daemon=True)
        t.start()
        t.join(wait)

    def done(self) -> None:
        self._stop()
        if self.exporter is not None and self.exporter.sent:
            logger.info(f"streamfix: traces: {self.exporter.sent} spans sent to {self.where}")


class _Exporter:
    """The SDK's OTLP exporter, saying once that the receiver does not answer (and once
    that it answers again) instead of a line per batch."""

    def __init__(self, inner: Any, where: str) -> None:
        self.inner = inner
        self.where = where
        self.down = False
        self.sent = 0
        self.dropped = 0

    def export(self, spans) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception as e:  # noqa: BLE001 - the SDK's thread must go on
            result, why = SpanExportResult.FAILURE, f"{type(e).__name__}: {e}"
        else:
            why = "it did not take them"
        if result == SpanExportResult.SUCCESS:
            self.sent += len(spans)
            if self.down:
                self.down = False
                logger.info(f"streamfix: traces: the receiver at {self.where} answers again")
        else:
            self.dropped += len(spans)
            if not self.down:
                self.down = True
                logger.warning(
                    f"streamfix: traces: the receiver at {self.where} did not take {len(spans)} spans ({why}); "
                    "spans are dropped until it answers, clients are not affected"
                )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
