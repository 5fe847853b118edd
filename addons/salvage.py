"""streamfix: what a repairer holds reaches the client when the upstream fails mid-body.

mitmproxy 12.3.1 ends a streamed response whose upstream resets or closes mid-body
without a last call of the stream callable: ``HttpStream.handle_protocol_error``
(``mitmproxy/proxy/layers/http/__init__.py``) runs the ``error`` hook, then sends the
client ``ResponseProtocolError``, which closes an HTTP/1 client connection (HTTP/2 resets
the stream). The stream callable is only called for ``ResponseData`` and
``ResponseEndOfMessage``. So the events a repairer holds at that moment (a chat finish
chunk waiting for usage, a nameless tool-call header waiting for its name) and the bytes
of an unfinished event would be lost, where a plain mitmdump delivers every byte.

This addon wraps ``HttpStream.handle_protocol_error`` once per process: for a
``ResponseProtocolError`` while the response is streamed to a client that can still be
written to, it first asks the stream callable for what it still holds (its ``salvage()``
method: :class:`addons.flowstream.FlowStream`, or the plain stream's :class:`wire.stream.Reads`, which asks its FlowStream) and sends that to the client as
response data, then lets mitmproxy go on as before (``error`` hook, connection closed).
The held events go out through every rule a cut stream can still satisfy (a renumbered
tool-call index, not the gateway's step index; :meth:`wire.stream.StreamRepair.salvage`),
the unfinished event as the upstream sent it: no terminal is added and nothing looks
complete, the client still sees the body cut. Any other stream callable, error or state
is left alone.

``streamfix_salvage=false`` turns the delivery off (the held bytes are then only logged
as not delivered). If mitmproxy's layer is not the shape this was written against, the
wrapper is not installed and one line says so.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from mitmproxy import ctx

logger = logging.getLogger(__name__)

MARK = "_streamfix_salvage"


def _install() -> str | None:
    """Wrap mitmproxy's protocol-error path; None on success, else why not."""
    try:
        from mitmproxy.proxy.layers import http as layers_http
        from mitmproxy.proxy.layers.http import _events
    except ImportError as e:  # pragma: no cover - another mitmproxy layout
        return f"mitmproxy's HTTP layer cannot be imported ({e})"
    stream_cls = getattr(layers_http, "HttpStream", None)
    send = getattr(layers_http, "SendHttp", None)
    response_data = getattr(_events, "ResponseData", None)
    protocol_error = getattr(_events, "ResponseProtocolError", None)
    original = getattr(stream_cls, "handle_protocol_error", None)
    if stream_cls is None or send is None or response_data is None or protocol_error is None or original is None:
        return "mitmproxy's HTTP layer has no HttpStream.handle_protocol_error"
    if getattr(original, MARK, False):
        return None  # already installed (the script was reloaded)
    if not inspect.isgeneratorfunction(original) or not all(
        hasattr(stream_cls, a) for a in ("state_stream_response_body", "state_errored")
    ):
        return "HttpStream.handle_protocol_error is not the generator streamfix was written against"

    def handle_protocol_error(self: Any, event: Any):
        if isinstance(event, protocol_error):
            yield from _salvage(self, send, response_data)
        return (yield from original(self, event))

    setattr(handle_protocol_error, MARK, True)
    handle_protocol_error.__wrapped__ = original  # type: ignore[attr-defined]
    handle_protocol_error.__doc__ = original.__doc__
    stream_cls.handle_protocol_error = handle_protocol_error
    return None


def _salvage(layer: Any, send: Any, response_data: Any):
    """The commands that send what the flow's stream callable still holds, if any."""
    try:
        flow = layer.flow
        resp = flow.response
        salvage = getattr(resp.stream, "salvage", None) if resp is not None else None
        if (
            salvage is None
            or layer.server_state != layer.state_stream_response_body
            or layer.client_state == layer.state_errored
            or not _enabled()
        ):
            return
        chunks = [c for c in salvage() if c]
    except Exception:  # the proxy must go on serving whatever happens here
        logger.exception("streamfix: collecting a failed stream's held bytes failed; they are lost")
        return
    for chunk in chunks:
        if layer.context.options.store_streamed_bodies:
            layer.response_body_buf += chunk
        yield send(response_data(layer.stream_id, chunk), layer.context.client)


def _enabled() -> bool:
    try:
        return bool(ctx.options.streamfix_salvage)
    except AttributeError:  # options not loaded (a test driving the layer alone)
        return True


class Salvage:
    """Installs the wrapper; ``streamfix_salvage`` switches the delivery."""

    def __init__(self) -> None:
        self.installed = False

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_salvage",
            bool,
            True,
            "When the upstream fails mid-body, send the client what the repairer still holds "
            "(held events, repaired as far as a cut stream allows; an unfinished event, as it "
            "came) before mitmproxy closes the connection. Off: those bytes are only logged as "
            "not delivered.",
        )
        why = _install()
        self.installed = why is None
        if why is not None:
            logger.warning(f"streamfix: held bytes cannot be delivered when an upstream fails mid-body: {why}")
