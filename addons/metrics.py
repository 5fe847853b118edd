"""streamfix: Prometheus metrics and health checks (``--set streamfix_metrics=HOST:PORT``).

Off by default. When off, this addon has no hooks at all: mitmproxy asks each addon for
its hook by name (``getattr``) and walks its ``addons`` list, which is empty then, so
nothing of this module runs per flow or per event, and ``prometheus_client`` is not even
imported. When on, it listens on ``HOST:PORT`` (``PORT`` alone: 127.0.0.1) on
mitmproxy's own event loop and answers:

* ``GET /metrics``: the Prometheus text exposition (metric names: :data:`NAMES`,
  docs/operations.md);
* ``GET /livez`` (also ``/healthz``): 200 while the event loop that carries the streams
  answers (the handler runs on it);
* ``GET /readyz``: 200 when the gateway answered recently (any HTTP response on the
  reverse listener within ``streamfix_ready_window`` seconds, else one ``GET /`` probe of
  the gateway, any HTTP status counting as an answer), 503 otherwise and while draining;
  a JSON body says why.

Where the numbers come from: the turn records (``addons/shared.py`` turn sinks) that
the turn log writes, so a turn counted here is the same line in ``streamfix_log``, with
the same API, ending, model, key, tokens, rules, verdict, violations, timings. Per flow
(never per event) a few hooks keep the gauges: streams in flight, and the time the
gateway last answered.

Label sets are bounded, so a client cannot create series with made-up model names or
keys: ``model`` is one of ``streamfix_metrics_models`` when that is set, else one of the
first ``streamfix_metrics_max_models`` distinct names seen, else ``other``; ``key`` is a
label from ``streamfix_key_labels`` (bounded by configuration), or one of the first
``streamfix_metrics_max_keys`` key ids seen, else ``other`` (a key is never a label value:
the turn log's 12-hex-digit id or its label). Rule, API, transport, ending, outcome and
evidence-source values come from the code, and are capped as well.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy import mode_specs

from . import shared

logger = logging.getLogger("streamfix.metrics")

NAMES = (
    "streamfix_turns_total",
    "streamfix_rule_events_total",
    "streamfix_verdicts_total",
    "streamfix_tokens_total",
    "streamfix_check_violations_total",
    "streamfix_streams_in_flight",
    "streamfix_requests_in_flight",
    "streamfix_salvaged_flows_total",
    "streamfix_salvaged_bytes_total",
    "streamfix_failed_open_total",
    "streamfix_ttfb_seconds",
    "streamfix_turn_duration_seconds",
    "streamfix_gateway_last_answer_timestamp_seconds",
    "streamfix_draining",
    "streamfix_label_overflow_total",
    "streamfix_build_info",
)
"""Every metric this module defines (counters without their ``_total`` suffix in the
exposition's HELP/TYPE lines, as prometheus_client writes them)."""

TTFB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
TOKEN_KINDS = (("input_tokens", "input"), ("output_tokens", "output"), ("cached_tokens", "cached"))
APIS = ("responses", "chat", "messages", "gemini")
OTHER = "other"
MAX_LABEL_CHARS = 64
CODE_LABEL_LIMIT = 64
"""Values that come from the code (rule names, APIs, outcomes) are capped too, in case."""


def parse_listen(spec: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` (on 127.0.0.1)."""
    spec = spec.strip()
    host, sep, port = spec.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", spec
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        p = -1
    if not 0 <= p <= 65535:
        raise exceptions.OptionsError(
            f"streamfix_metrics={spec}: give HOST:PORT or PORT, e.g. streamfix_metrics=127.0.0.1:9464"
        )
    return host, p


def check_metrics(spec: str) -> None:
    """``streamfix_metrics`` as the listener will take it: its form, and a port that can be
    bound (not in use, an address of this machine); raises OptionsError with the fix."""
    if not spec:
        return
    host, port = parse_listen(spec)
    why = cannot_listen(host, port)
    if why is not None:
        raise exceptions.OptionsError(f"streamfix_metrics={spec}: {why}")


def cannot_listen(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now (with the fix), or None: a socket is bound
    there and closed again, as asyncio's server binds it (``SO_REUSEADDR``)."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
    except socket.gaierror as e:
        return f"cannot listen on {host}:{port}: {host} is not an address here ({e.strerror})"
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            return (
                f"port {port} is in use on {host or 'all interfaces'} ({e.strerror}): stop what listens "
                f"there or give another port"
            )
        if e.errno == errno.EADDRNOTAVAIL:
            return f"cannot listen on {host}:{port}: {host} is not an address of this machine"
        if e.errno == errno.EACCES:
            return f"cannot listen on {host}:{port} ({e.strerror}): ports below 1024 need privileges; give a higher one"
        return f"cannot listen on {host}:{port} ({e.strerror or e})"
    return None


def check_at_least_0(name: str) -> Callable[[int], None]:
    def check(value: int) -> None:
        if value < 0:
            raise exceptions.OptionsError(f"{name}={value}: give 0 or more")

    return check


CHECKS: dict[str, Callable[[Any], None]] = {
    "streamfix_metrics": check_metrics,
    "streamfix_metrics_max_models": check_at_least_0("streamfix_metrics_max_models"),
    "streamfix_metrics_max_keys": check_at_least_0("streamfix_metrics_max_keys"),
    "streamfix_ready_window": check_at_least_0("streamfix_ready_window"),
}
"""This addon's value checks (run by ``configure``, by each script's Guard on what users
typed, and by the launcher before anything listens: addons/options.py)."""


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Bounded:
    """A label value from an open set, folded into a bounded one: the fixed set when
    given, else the first ``limit`` distinct values seen; anything else is ``other``."""

    def __init__(self, name: str, limit: int, fixed: Sequence[str] = (), keep: Callable[[str], bool] | None = None):
        self.name = name
        self.limit = max(0, limit)
        self.fixed = frozenset(fixed)
        self.keep = keep
        """Values always kept (configured key labels), outside the learnt set."""
        self.seen: set[str] = set()
        self.overflow: Callable[[str], None] | None = None

    def __call__(self, value: Any) -> str:
        if value is None or value == "":
            return "none"
        v = str(value)[:MAX_LABEL_CHARS]
        if self.fixed:
            if v in self.fixed:
                return v
        elif v in self.seen or self.keep is not None and self.keep(v):
            return v
        elif len(self.seen) < self.limit:
            self.seen.add(v)
            return v
        if self.overflow is not None:
            self.overflow(self.name)
        return OTHER


def _evidence_source(verdict: dict) -> str:
    """The evidence that says the verdict's outcome (the first one: the strongest);
    ``native`` for a gateway's own signal, ``none`` without evidence."""
    if verdict.get("native"):
        return "native"
    for e in verdict.get("evidence") or ():
        if e.get("says") == verdict.get("outcome"):
            return str(e.get("source"))
    return "none"


class Registry:
    """The metric objects of one enabled period (a fresh registry each time it is turned on)."""

    def __init__(self, models: Bounded, keys: Bounded, draining: Callable[[], bool]) -> None:
        import prometheus_client as pc  # only imported when metrics are on
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.pc = pc
        pc.disable_created_metrics()  # no *_created series: half the exposition, no use on a dashboard
        self.registry = r = CollectorRegistry()
        self.models, self.keys = models, keys
        self.code = Bounded("code", CODE_LABEL_LIMIT)
        for b in (models, keys, self.code):
            b.overflow = self._overflowed
        self.turns = Counter(
            "streamfix_turns",
            "Finished client turns (one per turn log line)",
            ["api", "transport", "ended", "model"],
            registry=r,
        )
        self.rule_events = Counter("streamfix_rule_events", "Events a repair rule changed", ["api", "rule"], registry=r)
        self.verdicts = Counter(
            "streamfix_verdicts",
            "Truncation verdicts by outcome and the evidence source that says it",
            ["api", "outcome", "source"],
            registry=r,
        )
        self.tokens = Counter(
            "streamfix_tokens",
            "Tokens told to the client (leg=client, after repairs) and "
            "reported by the upstream (leg=upstream, Devin's usage)",
            ["leg", "kind", "key", "model"],
            registry=r,
        )
        self.violations = Counter(
            "streamfix_check_violations", "Stream contract violations seen in check mode", ["api", "rule"], registry=r
        )
        self.in_flight = Gauge(
            "streamfix_streams_in_flight",
            "Client streams open now (sse: streamed responses; websocket: open sockets)",
            ["transport"],
            registry=r,
        )
        self.requests = Gauge(
            "streamfix_requests_in_flight",
            "Client requests between their request and the end of their response",
            registry=r,
        )
        self.salvaged = Counter(
            "streamfix_salvaged_flows",
            "Streams cut by the upstream whose held bytes were delivered before the connection closed",
            ["api"],
            registry=r,
        )
        self.salvaged_bytes = Counter("streamfix_salvaged_bytes", "Bytes delivered by salvage", registry=r)
        self.failed_open = Counter(
            "streamfix_failed_open", "Flows passed through unrepaired after a repairer error", ["api"], registry=r
        )
        self.ttfb = Histogram(
            "streamfix_ttfb_seconds",
            "Time from the client's request to the first response byte",
            ["api", "transport"],
            buckets=TTFB_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "streamfix_turn_duration_seconds",
            "Time from the client's request to the end of the turn",
            ["api", "transport"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.last_answer = Gauge(
            "streamfix_gateway_last_answer_timestamp_seconds",
            "When the gateway last answered (Unix time; 0: not yet)",
            registry=r,
        )
        Gauge("streamfix_draining", "1 while the sidecar drains (SIGTERM received)", registry=r).set_function(
            lambda: 1.0 if draining() else 0.0
        )
        self._children: dict[tuple, Any] = {}
        self.overflow = Counter(
            "streamfix_label_overflow",
            "Label values folded into 'other' (the bound was reached)",
            ["label"],
            registry=r,
        )
        from importlib.metadata import PackageNotFoundError, version

        def _v(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "unknown"

        from streamfix.wire import _core

        core = _core.describe().split(" (", 1)[0]  # compiled, pure or mixed: which protocol core runs
        Gauge(
            "streamfix_build_info",
            "Versions, and the protocol core that runs",
            ["version", "mitmproxy", "core"],
            registry=r,
        ).labels(_v("streamfix"), _v("mitmproxy"), core).set(1)
        pc.ProcessCollector(registry=r)
        self.sse = self.in_flight.labels("sse")
        self.websockets = self.in_flight.labels("websocket")
        for api in APIS:  # zeros from the start, so rate() and alerts see the series
            self.failed_open.labels(api)
            self.salvaged.labels(api)

    def _overflowed(self, label: str) -> None:
        self.overflow.labels(label).inc()

    def _c(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, cached: prometheus_client's ``labels()`` checks and
        locks on every call, most of a turn's cost; the cache is bounded as the labels are."""
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def exposition(self) -> bytes:
        return self.pc.generate_latest(self.registry)

    def observe(self, turn: dict[str, Any]) -> None:
        """One turn log record."""
        code = self.code
        api, transport = code(turn.get("api")), code(turn.get("transport"))
        ended = code(turn.get("ended"))
        model, key = self.models(turn.get("model")), self.keys(turn.get("key"))
        c = self._c
        c(self.turns, api, transport, ended, model).inc()
        for rule, n in (turn.get("rules") or {}).items():
            if isinstance(n, int) and n > 0:
                c(self.rule_events, api, code(rule)).inc(n)
        for rule, n in (turn.get("violations") or {}).items():
            if isinstance(n, int) and n > 0:
                c(self.violations, api, code(rule)).inc(n)
        v = turn.get("verdict")
        if isinstance(v, dict):
            c(self.verdicts, api, code(v.get("outcome")), code(_evidence_source(v))).inc()
        tokens = turn.get("tokens") or {}
        for leg in ("client", "upstream"):
            counts = tokens.get(leg)
            if not isinstance(counts, dict):
                continue
            for field, kind in TOKEN_KINDS:
                n = counts.get(field)
                if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                    c(self.tokens, leg, kind, key, model).inc(n)
        if ended == "failed_open":
            c(self.failed_open, api).inc()
        salvaged = turn.get("salvaged")
        if isinstance(salvaged, int) and salvaged > 0:
            c(self.salvaged, api).inc()
            self.salvaged_bytes.inc(salvaged)
        if isinstance(turn.get("ttfb_ms"), int):
            c(self.ttfb, api, transport).observe(turn["ttfb_ms"] / 1000)
        if isinstance(turn.get("duration_ms"), int):
            c(self.duration, api, transport).observe(turn["duration_ms"] / 1000)


class Live:
    """The per-flow hooks, present (in :attr:`Metrics.addons`) only while metrics are on."""

    def __init__(self, owner: Metrics, reg: Registry) -> None:
        self.owner = owner
        self.reg = reg
        self.streams: set[str] = set()
        self.requests: set[str] = set()
        self.sockets: set[str] = set()

    def _client(self, flow: http.HTTPFlow) -> bool:
        return not self.owner.reverse_only or isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self._client(flow) and flow.id not in self.requests:
            self.requests.add(flow.id)
            self.reg.requests.inc()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if not self._client(flow):
            return
        if isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode):
            self.owner.gateway_answered()
        if flow.response is not None and flow.response.stream and flow.id not in self.streams:
            self.streams.add(flow.id)
            self.reg.sse.inc()

    def response(self, flow: http.HTTPFlow) -> None:
        self._end(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._end(flow)

    def _end(self, flow: http.HTTPFlow) -> None:
        if flow.id in self.streams:
            self.streams.discard(flow.id)
            self.reg.sse.dec()
        if flow.id in self.requests and flow.websocket is None:
            self.requests.discard(flow.id)
            self.reg.requests.dec()

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if self._client(flow) and flow.id not in self.sockets:
            self.sockets.add(flow.id)
            self.reg.websockets.inc()
        if flow.id in self.requests:  # the upgrade's request is over; the socket counts now
            self.requests.discard(flow.id)
            self.reg.requests.dec()

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        if flow.id in self.sockets:
            self.sockets.discard(flow.id)
            self.reg.websockets.dec()


class Metrics:
    """The metrics and health addon; see the module docstring."""

    def __init__(self) -> None:
        self.addons: list[Any] = []
        self.reg: Registry | None = None
        self.server: asyncio.AbstractServer | None = None
        self.address: tuple[str, int] | None = None
        self.reverse_only = False
        self.last_answer: float | None = None
        self._probe: asyncio.Task | None = None
        self._sock: socket.socket | None = None
        self._probe_result: tuple[float, str | None] | None = None

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_metrics",
            str,
            "",
            """Serve Prometheus metrics and health checks on HOST:PORT (PORT alone: 127.0.0.1):
            /metrics, /livez, /readyz. Off when empty (no cost then). The listener has no
            authentication: keep it on loopback or a private network.""",
        )
        loader.add_option(
            "streamfix_metrics_models",
            Sequence[str],
            [],
            """Model names that get their own metric series (repeat the option); every other
            model is 'other'. Empty: the first streamfix_metrics_max_models names seen.""",
        )
        loader.add_option(
            "streamfix_metrics_max_models",
            int,
            20,
            "Without streamfix_metrics_models: how many distinct model names get a series "
            "(first come); later ones are 'other'.",
        )
        loader.add_option(
            "streamfix_metrics_max_keys",
            int,
            20,
            """How many distinct client key ids get a series (first come; labels from
            streamfix_key_labels always do); later ones are 'other'. 0: labelled keys only.""",
        )
        loader.add_option(
            "streamfix_ready_window",
            int,
            60,
            """/readyz says ready when the gateway answered within this many seconds (else it
            probes the gateway once with GET /).""",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "mode" in updated:
            self.reverse_only = any(m.startswith("reverse") for m in opts.mode)
        for n in ("streamfix_metrics_max_models", "streamfix_metrics_max_keys", "streamfix_ready_window"):
            if n in updated:
                CHECKS[n](getattr(opts, n))
        names = {"streamfix_metrics", "streamfix_metrics_models", "streamfix_metrics_max_models",
                 "streamfix_metrics_max_keys"}  # fmt: skip
        if not updated & names:
            return
        spec = opts.streamfix_metrics
        listen = parse_listen(spec) if spec else None
        if "streamfix_metrics" in updated or (listen is None) != (self.reg is None):
            self._stop()
            if listen is not None:
                self._start(listen)
        elif listen is not None:  # (so self.reg too) label bounds changed: start counting afresh
            self._stop()
            self._start(listen)

    # --- on / off ----------------------------------------------------------------
    def _start(self, listen: tuple[str, int]) -> None:
        opts = ctx.options
        try:
            import prometheus_client  # noqa: F401
        except ImportError as e:
            raise exceptions.OptionsError(
                f"streamfix_metrics needs prometheus_client ({e}); pip install prometheus_client"
            ) from e
        host, port = listen
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, _, _, _, addr = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(64)
            sock.setblocking(False)
        except OSError as e:
            why = cannot_listen(host, port) or f"cannot listen on {host}:{port} ({e.strerror or e})"
            raise exceptions.OptionsError(f"streamfix_metrics={opts.streamfix_metrics}: {why}") from None
        models = Bounded("model", opts.streamfix_metrics_max_models, opts.streamfix_metrics_models)
        keys = Bounded("key", opts.streamfix_metrics_max_keys, keep=_is_key_label)
        self.reg = Registry(models, keys, self.draining)
        if self.last_answer is not None:
            self.reg.last_answer.set(self.last_answer)
        self.address = sock.getsockname()[:2]
        self._sock = sock
        self.server = None
        asyncio.get_running_loop().create_task(self._serve(sock))
        self.addons = [Live(self, self.reg)]
        shared.add_turn_sink(self.reg.observe)
        h, p = self.address
        url = f"http://{'[' + h + ']' if ':' in h else h}:{p}"
        logger.info(f"streamfix: metrics at {url}/metrics, health at {url}/livez and {url}/readyz")
        if not is_loopback(h):
            logger.warning(
                f"streamfix: the metrics listener {h}:{p} is reachable beyond loopback and has no "
                "authentication (it shows key ids or labels and model names, never keys): "
                "keep it on a private network"
            )

    async def _serve(self, sock: socket.socket) -> None:
        try:
            self.server = await asyncio.start_server(self._handle, sock=sock)
        except Exception:
            logger.exception("streamfix: the metrics listener failed to start")

    def _stop(self) -> None:
        if self.reg is not None:
            shared.remove_turn_sink(self.reg.observe)
        self.addons = []
        self.reg = None
        if self.server is not None:
            self.server.close()
            self.server = None
        elif self._sock is not None:
            self._sock.close()
        self._sock = None

    def done(self) -> None:
        self._stop()

    # --- health --------------------------------------------------------------------
    def gateway_answered(self) -> None:
        self.last_answer = time.time()
        if self.reg is not None:
            self.reg.last_answer.set(self.last_answer)

    def draining(self) -> bool:
        master = getattr(ctx, "master", None)
        drain = master.addons.get("drain") if master is not None else None
        return bool(getattr(drain, "draining", False))

    def gateways(self) -> list[str]:
        out = []
        for m in ctx.options.mode:
            try:
                spec = mode_specs.ProxyMode.parse(m)
            except ValueError:
                continue
            if isinstance(spec, mode_specs.ReverseMode):
                out.append(spec.data)
        return out

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        body: dict[str, Any] = {"draining": self.draining()}
        gws = self.gateways()
        now = time.time()
        window = ctx.options.streamfix_ready_window
        body["gateway"] = gws[0] if gws else None
        if body["draining"]:
            return False, {"ready": False, "why": "draining", **body}
        if not gws:
            return True, {"ready": True, "why": "no reverse listener (nothing to probe)", **body}
        if self.last_answer is not None and now - self.last_answer <= window:
            return True, {"ready": True, "why": "the gateway answered a client request",
                          "answered_s_ago": round(now - self.last_answer, 3), **body}  # fmt: skip
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(probe(gws[0]))
        err = await asyncio.shield(self._probe)
        if err is None:
            self.gateway_answered()
            return True, {"ready": True, "why": "the gateway answered a probe (GET /)", "answered_s_ago": 0, **body}
        ago = None if self.last_answer is None else round(now - self.last_answer, 3)
        return False, {"ready": False, "why": f"the gateway did not answer: {err}", "answered_s_ago": ago, **body}

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, target = (line[0], line[1]) if len(line) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            ctype = "text/plain; charset=utf-8"
            if method not in ("GET", "HEAD"):
                status, body = 405, b"GET only\n"
            elif path == "/metrics" and self.reg is not None:
                status, body, ctype = 200, self.reg.exposition(), self.reg.pc.CONTENT_TYPE_LATEST
            elif path in ("/livez", "/healthz"):
                status, body = 200, b"ok\n"
            elif path == "/readyz":
                ok, info = await self.readiness()
                import orjson

                status, body, ctype = (200 if ok else 503), orjson.dumps(info) + b"\n", "application/json"
            else:
                status, body = 404, b"/metrics, /livez, /readyz\n"
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # a drain or shutdown cancelled this request: end quietly. Re-raised, the task
            # would end cancelled, and asyncio's own done-callback of start_server
            # (StreamReaderProtocol, Python 3.12) calls task.exception() on it, which logs
            # "Exception in callback ... CancelledError" with a Traceback
            pass
        except Exception:
            logger.exception("streamfix: the metrics listener failed on a request")
        finally:
            writer.close()


async def probe(url: str, timeout: float = 2.0) -> str | None:
    """``GET /`` on the gateway: None when any HTTP response came back, else why not."""
    u = urlsplit(url)
    tls = u.scheme in ("https", "wss")
    port = u.port or (443 if tls else 80)
    host = u.hostname or "127.0.0.1"
    sslctx = None
    if tls:
        sslctx = ssl.create_default_context()
        sslctx.check_hostname = False
        sslctx.verify_mode = ssl.CERT_NONE  # liveness of the gateway, not its identity
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=sslctx), timeout)
        try:
            w.write(f"GET / HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n\r\n".encode())
            await w.drain()
            line = await asyncio.wait_for(r.readline(), timeout)
        finally:
            w.close()
    except (TimeoutError, OSError) as e:
        return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if not line.startswith(b"HTTP/"):
        return f"not an HTTP answer ({line[:40]!r})"
    return None


def _is_key_label(value: str) -> bool:
    """No key (``-``) or a name from ``streamfix_key_labels``: bounded by configuration."""
    if value == "-":
        return True
    from . import turnlog

    return any(name == value for _, name in turnlog._labels)
