"""streamfix: keep secrets out of saved flows and mitmweb (``streamfix_redact``, default on).

The live request keeps its credentials: only what is stored or shown is redacted
(``wire/redact.py`` says what a secret is and what replaces it).

When, per flow:

``requestheaders`` ... ``request``
    The secret request headers and query values are swapped for placeholders *before*
    mitmweb's view adds the flow (it sends the flow to the browser at ``requestheaders``
    and again after every hook, in the ``update`` that mitmproxy triggers after it). They
    are swapped back by a small addon this one appends at the end of the addon chain
    (after the view), in the ``update`` that follows the ``request`` hook: the last thing
    before the request goes out. Other addons' ``request`` hooks therefore see the
    placeholders (:func:`original_header` gives streamfix's own the real value). A
    request whose body is streamed (``stream_large_bodies``) leaves right after
    ``requestheaders``: its secrets are swapped back in the update after that hook.
``responseheaders``, ``response``, ``error``
    The request has gone out: its secret headers, query values and Devin's session token
    (GetChatMessageRequest ``metadata.api_key``) are replaced for good, before ``-w``
    (mitmproxy's save addon writes at ``response``/``error``) and mitmweb see the flow
    again. ``Set-Cookie`` of a streamed response is replaced at ``response`` (its headers
    went to the client at ``responseheaders``); a buffered response's is left alone, since
    the client gets those headers only after every ``response`` hook.

Window left open: between the request going out and its response headers arriving, the
in-memory flow holds the credentials again (a browser that reloads mitmweb's flow list in
that moment sees them; what was pushed to it does not hold them, and ``-w`` never does, it
writes finished flows). Replaying a redacted flow (mitmweb's "Replay") sends the
placeholders: set ``streamfix_redact=false`` to replay with credentials.
"""

from __future__ import annotations

import logging

from mitmproxy import ctx, http
from streamfix.wire import redact
from streamfix.wire.devin import CHAT_PATH

from . import shared, turnlog

logger = logging.getLogger("streamfix.redact")

Held = list[tuple[str, list[str]]]
"""What a request held before its display copy was redacted: ("header name", values) and
("?path", [path])."""


class _Holding:
    __slots__ = ("held", "ready")

    def __init__(self, held: Held) -> None:
        self.held = held
        self.ready = False
        """The ``request`` hooks ran: restore at the next ``update``."""


def original_header(flow: http.HTTPFlow, name: str) -> str | None:
    """A request header as the client sent it, also while its display copy is redacted."""
    h = shared.held_secrets().get(flow.id)
    if h is not None:
        for held_name, values in h.held:
            if held_name == name.lower():
                return values[0]
    return flow.request.headers.get(name)


def original_path(flow: http.HTTPFlow) -> str:
    """The request path with its query as the client sent it."""
    h = shared.held_secrets().get(flow.id)
    if h is not None:
        for held_name, values in h.held:
            if held_name == "?path":
                return values[0]
    return flow.request.path


def redact_request(req: http.Request) -> Held:
    """Replace the request's secret headers and query values; returns the originals."""
    held: Held = []
    for name in redact.REQUEST_HEADERS:
        values = req.headers.get_all(name)
        if values and not all(redact.is_redacted(v) for v in values):
            held.append((name, values))
            req.headers.set_all(name, [redact.redact_header(name, v) for v in values])
    path = redact.redact_query(req.path)
    if path != req.path:
        held.append(("?path", [req.path]))
        req.path = path
    return held


def restore_request(req: http.Request, held: Held) -> None:
    """Undo :func:`redact_request` (only where the value is still our placeholder)."""
    for name, values in held:
        if name == "?path":
            if redact.is_redacted(req.path):
                req.path = values[0]
        elif all(redact.is_redacted(v) for v in req.headers.get_all(name)):
            req.headers.set_all(name, values)


def redact_flow(flow: http.HTTPFlow, response_headers: bool, body: bool = True) -> None:
    """Redact a flow for good (its request has gone out); ``body=False`` skips the
    request body (already done: it costs a protobuf parse)."""
    redact_request(flow.request)
    if body and flow.request.method == "POST" and flow.request.path.split("?", 1)[0] == CHAT_PATH:
        raw = flow.request.raw_content
        if raw and not flow.request.headers.get("content-encoding"):
            new = redact.redact_devin_request(raw)
            if new is not None:
                flow.request.raw_content = new  # the stored copy: content-length as sent
    if response_headers and flow.response is not None:
        for name in redact.RESPONSE_HEADERS:
            values = flow.response.headers.get_all(name)
            if values:
                flow.response.headers.set_all(name, [redact.redact_header(name, v) for v in values])


class Restore:
    """The tail of the addon chain: gives the request back the secrets held since
    ``requestheaders``, in the ``update`` after its ``request`` hooks (mitmweb's view has
    sent its redacted copy by then)."""

    name = "streamfix-redact-restore"

    def update(self, flows) -> None:
        holding = shared.held_secrets()
        for flow in flows:
            h = holding.get(flow.id)
            if h is None:
                continue
            req = getattr(flow, "request", None)
            if h.ready or (req is not None and req.stream):
                del holding[flow.id]
                restore_request(flow.request, h.held)


class Redact:
    """See the module docstring."""

    def __init__(self) -> None:
        self._body_done: set[str] = set()
        """Flows whose request body was redacted at responseheaders (until response/error)."""

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_redact",
            bool,
            True,
            "Redact secrets (Authorization, Proxy-Authorization, X-Api-Key, X-Goog-Api-Key, "
            "Cookie and Set-Cookie headers, ?key=-style query values, Devin's session token) "
            "in saved flows (-w, mitmweb's save) and in mitmweb. The request to the upstream "
            "keeps them. false keeps everything as it was sent.",
        )

    def running(self) -> None:
        master = getattr(ctx, "master", None)
        addons = getattr(master, "addons", None)
        if addons is not None and addons.get(Restore.name) is None:
            addons.add(Restore())

    def _tail(self) -> bool:
        addons = getattr(getattr(ctx, "master", None), "addons", None)
        return addons is not None and addons.get(Restore.name) is not None

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if shared.has_turn_sinks():  # a turn that ends after the key is redacted keeps its label
            turnlog.see_key(flow.request.headers.get, flow.request.path)
        if not ctx.options.streamfix_redact or flow.live is False or not self._tail():
            return  # without the tail addon nobody would put the secrets back in time
        try:
            held = redact_request(flow.request)
        except Exception:  # fail open: nothing redacted for display
            logger.exception("streamfix: redacting a request for display failed")
            return
        if held:
            shared.held_secrets()[flow.id] = _Holding(held)

    def request(self, flow: http.HTTPFlow) -> None:
        h = shared.held_secrets().get(flow.id)
        if h is not None:
            h.ready = True

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        shared.held_secrets().pop(flow.id, None)
        if self._final(flow, response_headers=False, body=True):
            self._body_done.add(flow.id)

    def response(self, flow: http.HTTPFlow) -> None:
        streamed = flow.response is not None and bool(flow.response.stream)
        done = flow.id in self._body_done
        self._body_done.discard(flow.id)
        self._final(flow, response_headers=streamed or not flow.live, body=not done)

    def error(self, flow: http.HTTPFlow) -> None:
        shared.held_secrets().pop(flow.id, None)
        done = flow.id in self._body_done
        self._body_done.discard(flow.id)
        self._final(flow, response_headers=True, body=not done)

    def _final(self, flow: http.HTTPFlow, response_headers: bool, body: bool) -> bool:
        if not ctx.options.streamfix_redact:
            return False
        try:
            redact_flow(flow, response_headers, body)
        except Exception:
            logger.exception("streamfix: redacting a flow failed; it is stored as it was")
            return False
        return True
