"""streamfix, upstream leg: read CPA's calls to its providers for their real stop reason.

    mitmdump --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 \\
             --mode regular@127.0.0.1:8080 \\
             -s addons/repair.py -s addons/upstream.py -s addons/views.py

CPA is configured with ``proxy-url: http://127.0.0.1:8080`` and trusts mitmproxy's CA
(docs/upstream-leg.md). Flows that arrive on the regular listener are CPA's own upstream
calls. This addon:

* passes every TLS connection to a host not in ``streamfix_upstream_hosts`` through
  untouched (``tls_clienthello``: no interception, no certificate, no flow), so CPA's
  other upstreams never see the sidecar's CA;
* on ``POST .../exa.api_server_pb.ApiServerService/GetChatMessage`` to a Devin host,
  matches the request to the client request that caused it and, if that client asked for
  fewer output tokens than CPA forwarded (CPA drops ``max_output_tokens`` on
  ``/v1/responses``), lowers field 8.2;
* streams the response through :class:`wire.devin.DevinTap` byte for byte unchanged, and
  the moment the end-of-stream envelope passes, records StopReason, usage and content
  digest in the shared :class:`wire.correlate.Correlator`, where the client leg's
  verdict finds it (:func:`resolver_for`);
* keeps the body on the flow at the end (copied once) for the "Connect frames" view;
* on a ``POST`` to any other listed provider host whose path a decoder reads (Gemini
  ``:streamGenerateContent`` / ``:generateContent``, Interactions, Anthropic ``/messages``,
  chat ``/chat/completions``, ``/responses``; ``wire/upstream_decoders.py``), matches it to
  its client request by prompt (nothing patched) and streams the response, SSE or JSON,
  through a compiled :class:`wire.upstream_decoders.CallTap`: every read goes on as the
  same object, and the call's facts (finish, usage, in-band errors, how the body ended)
  reach the correlator at the provider's decisive event and, final, at the body's end.

The client-leg addon calls :func:`note_client_request` at ``request`` time and sets
``verdict.resolver = resolver_for(flow.id)``. Everything here fails open: an error in the
tap is noted and the bytes go on as they came.
"""

from __future__ import annotations

import logging
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx, http, tls
from mitmproxy.proxy import mode_specs

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "streamfix" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # -s from a checkout that is not pip-installed (installed: nothing to add)

from streamfix.addons import options, shared
from streamfix.addons.upstream_hosts import DEFAULT_UPSTREAM_HOSTS, host_matches, upstream_hosts
from streamfix.wire.correlate import Correlator, PendingRequest, Resolver
from streamfix.wire.devin import CHAT_PATH, DevinTap, TapResult, patch_max_tokens, read_request
from streamfix.wire.encoding import decoder_for as body_decoder_for
from streamfix.wire.upstream_call import CallResult
from streamfix.wire.upstream_decoders import CallDecoder, CallTap, decoder_for, provider_for_path, read_json_request

logger = logging.getLogger("streamfix.upstream")

STREAM_TYPES = ("application/connect+", "application/grpc", "text/event-stream")
"""Responses on the regular listener that are streamed, never buffered by mitmproxy."""


# --- what the client-leg addon calls ----------------------------------------------------


def shared_correlator() -> Correlator:
    """The correlator both legs of this process use."""
    return shared.correlator()


def note_client_request(flow_id: str, path: str, body: Any) -> PendingRequest | None:
    """Call from the client leg's ``request`` hook with the parsed JSON request body:
    remembers its output cap and prompt texts so the upstream request it causes can be
    matched (and its max tokens patched). Cheap; never raises on odd bodies."""
    try:
        return shared.correlator().note_client_request(flow_id, path, body)
    except Exception:  # never let bookkeeping break the client leg
        logger.exception("streamfix: note_client_request failed")
        return None


def resolver_for(flow_id: str) -> Resolver:
    """``verdict.resolver = resolver_for(flow.id)``: at ``decide()`` it finds the finished
    upstream flow with the verdict's digest and reports its StopReason (and usage); its
    ``.record`` then holds what it found (``None`` if nothing matched)."""
    return shared.correlator().resolver(flow_id)


def forget_client(flow_id: str) -> None:
    """Call when a client flow ends without a verdict (error, non-stream): frees its
    pending request early (it would expire anyway)."""
    shared.correlator().forget_client(flow_id)


# --- the addon ------------------------------------------------------------------------


class UpstreamStream:
    """``flow.response.stream`` for a Devin response: the same bytes out, a tap inside.

    Returns each chunk as it came (``[]`` for the final ``b""`` call, never ``b""``
    mid-stream) and never raises. Chunks are kept by reference and joined once at the end.
    """

    __slots__ = ("chunks", "failed", "finished", "flow", "inflate", "leg", "tap")

    def __init__(self, leg: UpstreamLeg, flow: http.HTTPFlow, tap: DevinTap, inflate: Any) -> None:
        self.leg = leg
        self.flow = flow
        self.tap = tap
        self.inflate = inflate
        self.chunks: list[bytes] = []
        self.finished = False
        self.failed: str | None = None

    def __call__(self, chunk: bytes) -> bytes | list[bytes]:
        if chunk:
            self.chunks.append(chunk)
        if self.failed is None:
            try:
                if chunk:
                    self.tap.feed(self.inflate.decompress(chunk) if self.inflate else chunk)
                    if self.tap.ended and not self.finished:
                        self.finish()
                else:
                    if self.inflate is not None:
                        self.tap.feed(self.inflate.flush())
                    self.finish()
            except Exception as e:  # noqa: BLE001 - fail open: stop reading, keep forwarding
                self.failed = f"{type(e).__name__}: {e}"
                logger.warning(f"streamfix: upstream tap failed ({self.failed}); stream passed through")
        return chunk if chunk else []

    def finish(self, cut: bool = True) -> None:
        """End of stream (or of body): record the result once. A body that ends before
        the end-of-stream envelope is a truncated call (a failure), unless ``cut`` is
        False: CPA went away first, which proves nothing of what Devin sent."""
        if self.finished:
            return
        self.finished = True
        self.leg.finished(self.flow, self.tap.close() if cut and not self.tap.ended else self.tap.result())


class ProviderStream:
    """Another provider's response (SSE or JSON): ``flow.response.stream`` is its
    :attr:`tap`, a :class:`wire.upstream_decoders.CallTap` (compiled: mitmproxy calls no
    interpreted code per read), which returns every read as it came and feeds the decoder;
    this object records the call's facts at the decisive event and at the end. The reads
    are kept (and joined once at the end) only when bodies are kept (mitmweb, ``-w``)."""

    __slots__ = ("decoder", "finished", "flow", "leg", "tap")

    def __init__(self, leg: UpstreamLeg, flow: http.HTTPFlow, decoder: CallDecoder, inflate: Any, keep: bool) -> None:
        self.leg = leg
        self.flow = flow
        self.decoder = decoder
        self.finished = False
        self.tap = CallTap(decoder, inflate, keep, self.decided, self.finish)

    @property
    def chunks(self) -> list[bytes]:
        return self.tap.chunks

    def decided(self) -> None:
        """The decisive event passed: CPA has not read it yet."""
        try:
            self.leg.decided(self.flow, self.decoder.result())
        except Exception:
            logger.exception("streamfix: recording an upstream result failed")

    def finish(self, cut: bool = False) -> None:
        """End of body (``cut``: the connection failed first): record the result once."""
        if self.finished:
            return
        self.finished = True
        try:
            if self.tap.failed is not None:
                logger.warning(f"streamfix: upstream decoder failed ({self.tap.failed}); stream passed through")
            self.leg.finished(self.flow, self.decoder.close(cut=cut))
        except Exception:
            logger.exception("streamfix: recording an upstream result failed")


class UpstreamLeg:
    """The regular-mode (gateway -> provider) addon; see the module docstring."""

    def __init__(self, correlator: Correlator | None = None) -> None:
        self._correlator = correlator
        self.hosts: tuple[str, ...] = DEFAULT_UPSTREAM_HOSTS
        self.streams: dict[str, UpstreamStream | ProviderStream] = {}
        self._passed: set[str] = set()
        self.seen = 0

    @property
    def correlator(self) -> Correlator:
        return self._correlator if self._correlator is not None else shared.correlator()

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_upstream",
            bool,
            True,
            """Read CPA's upstream Devin calls arriving on the regular-mode listener
            (Devin's StopReason and usage for the truncation verdict, the max-tokens patch).""",
        )
        loader.add_option(
            "streamfix_upstream_hosts",
            Sequence[str],
            list(DEFAULT_UPSTREAM_HOSTS),
            """Provider hosts (exact, or *.domain / *-suffix patterns) intercepted and
            decoded on the regular-mode listener: Devin's and the public API hosts of
            Gemini, Vertex, the Gemini CLI, Antigravity, Anthropic, OpenAI and Codex by
            default (CPA must trust the sidecar's CA for them). TLS to every other host is
            passed through untouched.""",
        )
        loader.add_option(
            "streamfix_upstream_patch_max_tokens",
            bool,
            True,
            """Lower Devin's max tokens (GetChatMessageRequest field 8.2) to the output cap
            the client asked for when CPA forwarded a higher one (CPA drops
            max_output_tokens on /v1/responses).""",
        )

    def configure(self, updated: set[str]) -> None:
        if "streamfix_upstream_hosts" in updated:
            self.hosts = upstream_hosts(ctx.options.streamfix_upstream_hosts)

    # --- which connections and flows -----------------------------------------------
    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        if not isinstance(data.context.client.proxy_mode, mode_specs.RegularMode):
            return
        host = data.client_hello.sni
        if not host and data.context.server.address:
            host = data.context.server.address[0]
        if host and host_matches(host, self.hosts):
            return
        data.ignore_connection = True
        if host and host not in self._passed and len(self._passed) < 1000:
            self._passed.add(host)
            logger.info(f"streamfix: passing TLS to {host} through untouched (not in streamfix_upstream_hosts)")

    def _devin_flow(self, flow: http.HTTPFlow) -> bool:
        if not isinstance(flow.client_conn.proxy_mode, mode_specs.RegularMode):
            return False
        if not ctx.options.streamfix_upstream or flow.request.method != "POST":
            return False
        if flow.request.path.split("?", 1)[0] != CHAT_PATH:
            return False
        return host_matches(flow.request.host, self.hosts) or host_matches(flow.request.pretty_host, self.hosts)

    def _provider(self, flow: http.HTTPFlow) -> str | None:
        """The provider wire of a call on the regular listener (``gemini``, ``anthropic``,
        ...; wire/upstream_decoders.py), or None: not a POST to a listed host, or a path
        no decoder reads."""
        if not isinstance(flow.client_conn.proxy_mode, mode_specs.RegularMode):
            return None
        if not ctx.options.streamfix_upstream or flow.request.method != "POST":
            return None
        provider = provider_for_path(flow.request.path)
        if provider is None:
            return None
        if host_matches(flow.request.host, self.hosts) or host_matches(flow.request.pretty_host, self.hosts):
            return provider
        return None

    # --- hooks ---------------------------------------------------------------------
    def request(self, flow: http.HTTPFlow) -> None:
        if not self._devin_flow(flow):
            provider = self._provider(flow)
            if provider is not None:
                self._provider_request(flow, provider)
            return
        self.seen += 1
        corr = self.correlator
        pending: PendingRequest | None = None
        sent = original = None
        try:
            body = flow.request.raw_content
            if body is not None and not flow.request.headers.get("content-encoding"):
                info = read_request(body)
                if info is not None:
                    sent = info.max_tokens
                    pending = corr.match_request(flow.id, info)
                    if pending is not None and pending.cap and ctx.options.streamfix_upstream_patch_max_tokens:
                        patched = patch_max_tokens(body, pending.cap)
                        if patched is not None:
                            flow.request.content, original = patched
                            sent = pending.cap
                            logger.info(
                                f"streamfix: Devin max_tokens {original} -> {sent} "
                                f"(client {pending.path} {pending.cap_field}={pending.cap})"
                            )
        except Exception as e:  # noqa: BLE001 - fail open: the request goes out as it came
            logger.warning(f"streamfix: reading the Devin request failed ({type(e).__name__}); unchanged")
        corr.upstream_started(
            flow.id,
            pending.flow_id if pending else None,
            sent,
            original,
            link_ambiguous=pending.last_match_ambiguous if pending else False,
        )
        flow.metadata["streamfix.devin_request"] = {
            "client_flow": pending.flow_id if pending else None,
            "max_tokens": sent,
            "max_tokens_original": original,
        }

    def _provider_request(self, flow: http.HTTPFlow, provider: str) -> None:
        """Another provider's call: matched to its client request by prompt (no patch)."""
        self.seen += 1
        corr = self.correlator
        pending: PendingRequest | None = None
        cap = None
        try:
            body = flow.request.raw_content
            if body is not None and not flow.request.headers.get("content-encoding"):
                info = read_json_request(provider, body)
                if info is not None:
                    cap = info.max_tokens
                    pending = corr.match_request(flow.id, info)
        except Exception as e:  # noqa: BLE001 - fail open: the request goes out as it came
            logger.warning(f"streamfix: reading the {provider} request failed ({type(e).__name__}); unchanged")
        corr.upstream_started(
            flow.id,
            pending.flow_id if pending else None,
            cap,
            None,
            link_ambiguous=pending.last_match_ambiguous if pending else False,
            provider=provider,
        )
        flow.metadata["streamfix.upstream_request"] = {
            "provider": provider,
            "client_flow": pending.flow_id if pending else None,
            "max_tokens": cap,
        }

    def _provider_headers(self, flow: http.HTTPFlow, provider: str) -> None:
        resp = flow.response
        assert resp is not None
        ctype = resp.headers.get("content-type", "")
        decoder = decoder_for(provider, ctype) if resp.status_code == 200 else None
        if decoder is None:
            self.correlator.upstream_dropped(flow.id)
            if resp.status_code != 200:
                logger.info(f"streamfix: upstream {provider} call answered HTTP {resp.status_code}: not a result")
            if resp.raw_content is None and ctype.lower().startswith(STREAM_TYPES):
                resp.stream = True
            return
        if resp.raw_content is not None:
            return  # already buffered (replay): read in response()
        ce = resp.headers.get("content-encoding", "")
        try:
            inflate = body_decoder_for(ce)
        except ValueError:
            logger.info(f"streamfix: {provider} response with content-encoding {ce!r}: not read")
            self.correlator.upstream_dropped(flow.id)
            resp.stream = True
            return
        opts = ctx.options
        keep = bool(getattr(opts, "streamfix_keep_bodies", False) or getattr(opts, "save_stream_file", None))
        s = ProviderStream(self, flow, decoder, inflate, keep)
        self.streams[flow.id] = s
        resp.stream = s.tap

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        resp = flow.response
        if resp is None or not isinstance(flow.client_conn.proxy_mode, mode_specs.RegularMode):
            return
        rec = self.correlator.records.get(flow.id)
        if rec is not None and rec.provider != "devin":
            self._provider_headers(flow, rec.provider)
            return
        ctype = resp.headers.get("content-type", "").lower()
        devin = flow.id in self.correlator.records and self._devin_flow(flow)
        if not devin:
            if resp.raw_content is None and ctype.startswith(STREAM_TYPES):
                resp.stream = True  # never buffer a stream on CPA's way
            return
        if resp.status_code != 200 or not ctype.startswith("application/connect+proto"):
            self.correlator.upstream_dropped(flow.id)
            if resp.raw_content is None and ctype.startswith(STREAM_TYPES):
                resp.stream = True
            return
        if resp.raw_content is not None:
            return  # already buffered (replay): read in response()
        ce = resp.headers.get("content-encoding", "").lower().strip()
        inflate = None
        if ce in ("gzip", "deflate", "x-gzip"):
            inflate = zlib.decompressobj(wbits=47)
        elif ce not in ("", "identity"):
            logger.info(f"streamfix: Devin response with content-encoding {ce!r}: not read")
            self.correlator.upstream_dropped(flow.id)
            resp.stream = True
            return
        s = UpstreamStream(self, flow, DevinTap(), inflate)
        self.streams[flow.id] = s
        resp.stream = s

    def response(self, flow: http.HTTPFlow) -> None:
        s = self.streams.pop(flow.id, None)
        resp = flow.response
        if isinstance(s, ProviderStream):
            s.finish()
            if resp is not None:
                if resp.raw_content is None and s.chunks:
                    resp.raw_content = b"".join(s.chunks)
                resp.stream = True  # the tap lets go of the flow (it was streamed)
            return
        rec = self.correlator.records.get(flow.id)
        if s is None and rec is not None and rec.provider != "devin":
            if rec.finished is None and resp is not None and resp.raw_content is not None and resp.status_code == 200:
                decoder = decoder_for(rec.provider, resp.headers.get("content-type", ""))
                if decoder is not None:  # a buffered body (replayed flow, streaming switched off)
                    try:
                        body = resp.get_content(strict=True) or b""
                    except ValueError:
                        self.correlator.upstream_dropped(flow.id)
                        return
                    decoder.feed(body)
                    self.finished(flow, decoder.close())
            return
        if s is not None:
            s.finish()  # normally done already, at the end-of-stream envelope
            if resp is not None and resp.raw_content is None:
                resp.raw_content = b"".join(s.chunks)  # one copy, for views and saved flows
            return
        if resp is None or flow.id not in self.correlator.records or not self._devin_flow(flow):
            return
        rec = self.correlator.records[flow.id]
        if rec.finished is not None or resp.raw_content is None:
            return
        if resp.status_code != 200 or not resp.headers.get("content-type", "").lower().startswith(
            "application/connect+proto"
        ):
            return
        try:  # a buffered body (replayed flow, streaming switched off by someone)
            body = resp.get_content(strict=True) or b""
        except ValueError:
            self.correlator.upstream_dropped(flow.id)
            return
        tap = DevinTap()
        tap.feed(body)
        self.finished(flow, tap.close())

    def error(self, flow: http.HTTPFlow) -> None:
        s = self.streams.pop(flow.id, None)
        if s is None:
            return
        # the provider's connection failed before the body's end: a cut body (Devin: a
        # truncated call unless its trailer already passed); CPA going away (its own client
        # aborted, or it stopped reading) cuts nothing the provider sent
        s.finish(cut="client" not in (flow.error.msg if flow.error is not None else "").lower())
        if flow.response is not None:
            if flow.response.raw_content is None and s.chunks:
                flow.response.raw_content = b"".join(s.chunks)
            if isinstance(s, ProviderStream):
                flow.response.stream = True  # the tap lets go of the flow (it was streamed)

    # --- results -------------------------------------------------------------------
    def decided(self, flow: http.HTTPFlow, result: CallResult) -> None:
        """A provider call's decisive event passed: its facts go to the correlator now,
        before CPA reads them (the end of the body may still amend them)."""
        self.correlator.upstream_finished(flow.id, result)

    def finished(self, flow: http.HTTPFlow, result: TapResult | CallResult) -> None:
        if isinstance(result, CallResult):
            self._call_finished(flow, result)
            return
        rec = self.correlator.upstream_finished(flow.id, result)
        u = result.usage
        line = result.detail()
        if u is not None:
            line += f"; usage input {u.input_tokens} (cached {u.cached_tokens}) output {u.output_tokens}"
            line += f" ({u.source}{', model ' + u.model if u.model else ''})"
        line += f"; {result.frames} frames, text {result.digest[1]} B, arguments {result.digest[3]} B"
        if rec is not None and rec.max_tokens_sent is not None:
            line += f"; max_tokens {rec.max_tokens_sent}"
            if rec.max_tokens_original is not None:
                line += f" (patched from {rec.max_tokens_original})"
        if result.bad_frames:
            line += f"; {result.bad_frames} frames not parsed"
        logger.info(f"streamfix: upstream {flow.request.path.rsplit('/', 1)[-1]}: {line}")
        flow.metadata["streamfix.devin"] = {
            "stop_reason": result.stop_reason,
            "stop_reason_name": result.stop_reason_name,
            "outcome": result.outcome,
            "usage": None if u is None else {
                "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                "cached_tokens": u.cached_tokens, "cache_write_tokens": u.cache_write_tokens,
                "model": u.model, "source": u.source,
            },
            "trailer_error": None if result.trailer is None else result.trailer.error_code,
            "error": result.error,
            "frames": result.frames,
        }  # fmt: skip
        comment = f"streamfix: {line}"
        flow.comment = f"{flow.comment}\n{comment}" if flow.comment else comment

    def _call_finished(self, flow: http.HTTPFlow, result: CallResult) -> None:
        rec = self.correlator.upstream_finished(flow.id, result)
        line = _call_line(result, rec.max_tokens_sent if rec is not None else None)
        s = self.streams.get(flow.id)
        stopped = s.decoder.stopped if isinstance(s, ProviderStream) else None
        if stopped:
            line += f"; {stopped}"
        logger.info(f"streamfix: upstream {flow.request.path.split('?', 1)[0]}: {line}")
        u = result.usage
        flow.metadata["streamfix.upstream"] = {
            "provider": result.provider,
            "finish": result.finish,
            "finish_field": result.finish_field,
            "outcome": result.outcome,
            "ended": result.ended,
            "errors": list(result.errors),
            "usage": None if u is None else {
                "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                "reasoning_tokens": u.reasoning_tokens, "cached_tokens": u.cached_tokens,
                "total_tokens": u.total_tokens, "model": u.model, "source": u.source,
            },
            "events": result.events,
        }  # fmt: skip
        comment = f"streamfix: {line}"
        flow.comment = f"{flow.comment}\n{comment}" if flow.comment else comment


addons = [UpstreamLeg(), options.Guard(__file__)]  # last: checks the --set values of its options


def _call_line(result: CallResult, cap: int | None) -> str:
    """The upstream log line and comment of a provider call (no content)."""
    line = f"{result.detail()}; outcome {result.outcome}"
    u = result.usage
    if u is not None:
        line += f"; usage input {u.input_tokens} (cached {u.cached_tokens}) output {u.output_tokens}"
        if u.reasoning_tokens:
            line += f" (reasoning {u.reasoning_tokens})"
        line += f" total {u.total_tokens} ({u.source}{', model ' + u.model if u.model else ''})"
    ev = "events" if result.framing == "sse" else "JSON items"
    line += f"; {result.events} {ev}, text {result.digest[1]} B, arguments {result.digest[3]} B"
    if cap is not None:
        line += f"; max tokens {cap}"
    if result.bad:
        line += f"; {result.bad} not parsed"
    return line
