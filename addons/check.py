"""Check mode (``--set streamfix_mode=check``): report, never change.

Every client-leg stream goes through :class:`wire.contract.StreamChecker` as it passes;
the bytes the client gets are the gateway's, untouched (headers too). Each violation of
the stream contract is logged (rule, event number, short reason; never content), and
the flow gets a comment (the receipt) listing them, so mitmweb shows them per flow.

Used by ``addons/repair.py`` (its ``responseheaders``/``response`` hooks hand a flow here
when the mode is ``check``).
"""

from __future__ import annotations

import logging
from collections import Counter

from mitmproxy import http
from streamfix.wire.contract import StreamChecker, Violation, check_json
from streamfix.wire.encoding import Decoder, decoder_for

logger = logging.getLogger("streamfix")

LOG_LIMIT = 50
"""Violations logged per flow (all are counted; the receipt names every rule)."""


class CheckStream:
    """The ``flow.response.stream`` callable in check mode: the chunk goes out as it
    came; a decoded copy feeds the checker. A checker error only ends the checking."""

    __slots__ = ("checker", "decoder", "failed", "on_eof")

    def __init__(self, checker: StreamChecker, decoder: Decoder | None, on_eof) -> None:
        self.checker = checker
        self.decoder = decoder
        self.on_eof = on_eof
        self.failed: BaseException | None = None

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.failed is None:
            try:
                data = chunk
                if self.decoder is not None:
                    data = self.decoder.flush() if chunk == b"" else self.decoder.decode(chunk)
                if data:
                    self.checker.feed(data)
                if chunk == b"":
                    self.checker.close()
            except Exception as e:  # noqa: BLE001  (a checker bug must never touch the stream)
                self.failed = e
        if chunk == b"":
            on_eof, self.on_eof = self.on_eof, None
            try:
                if on_eof is not None:
                    on_eof(self)
            except Exception:
                logger.exception("streamfix: error while reporting a checked flow")
        return [chunk] if chunk else []  # never b"": that ends an HTTP/1 chunked body

    def detach(self) -> None:
        """The flow is over: drop the closure back to the flow (a reference cycle
        otherwise), as :meth:`addons.flowstream.FlowStream.detach` does."""
        self.on_eof = None


def stream(flow: http.HTTPFlow, api: str, on_eof, request=None, client: str | None = None) -> CheckStream | None:
    """The check-mode stream callable for a streamed flow (None, logged, if its
    content-encoding is unknown); ``request`` (the client's body) and ``client`` as
    :class:`wire.contract.StreamChecker` takes them."""
    assert flow.response is not None
    try:
        decoder = decoder_for(flow.response.headers.get("content-encoding", ""))
    except ValueError as e:
        logger.warning(f"streamfix: {where(flow)}: {e}; not checked")
        return None
    return CheckStream(StreamChecker(api, client=client, request=request), decoder, on_eof)


class JsonCheck:
    """A non-streamed body's violations (:func:`wire.contract.check_json`), reported as a
    stream's are (:func:`report`)."""

    __slots__ = ("dropped", "events", "violations")

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        self.dropped = 0
        self.events = 1


def check_json_body(flow: http.HTTPFlow, api: str, request=None) -> JsonCheck | None:
    """Check mode on a JSON (non-streamed) response body."""
    assert flow.response is not None
    try:
        content = flow.response.get_content(strict=True)
    except ValueError as e:
        logger.warning(f"streamfix: {where(flow)}: cannot decode body ({e}); not checked")
        return None
    return JsonCheck(check_json(api, content or b"", request))


def check_buffered(flow: http.HTTPFlow, api: str) -> StreamChecker | None:
    """Check a buffered SSE body (replay, ``-nr``, mitmweb without streaming)."""
    assert flow.response is not None
    try:
        content = flow.response.get_content(strict=True)
    except ValueError as e:
        logger.warning(f"streamfix: {where(flow)}: cannot decode body ({e}); not checked")
        return None
    c = StreamChecker(api)
    c.feed(content or b"")
    c.close()
    return c


def report(flow: http.HTTPFlow, api: str, checker, failed: BaseException | None = None) -> int:
    """Log the violations, comment the flow; returns how many there were."""
    vs: list[Violation] = checker.violations
    total = len(vs) + checker.dropped
    w = where(flow)
    if failed is not None:
        logger.error(f"streamfix: {w}: checker failed ({type(failed).__name__}: {failed}); checked up to the failure")
    line = receipt(api, checker)
    if total:  # the per-flow summary in the log too, not only in the flow comment
        logger.warning(f"streamfix: {w}: {line}")
    for v in vs[:LOG_LIMIT]:
        logger.warning(f"streamfix: {w}: check: {v}")
    if total > LOG_LIMIT:
        logger.warning(f"streamfix: {w}: check: {total - LOG_LIMIT} more violations not logged")
    if total:
        flow.marked = ":warning:"
        lines = [line] + [f"  {v}" for v in vs[:LOG_LIMIT]]
        comment(flow, "\n".join(lines))
    else:
        logger.info(f"streamfix: {w}: {line}")
        comment(flow, line)
    return total


def receipt(api: str, checker) -> str:
    vs = checker.violations
    total = len(vs) + checker.dropped
    if not total:
        return f"streamfix [{api}] check: {checker.events} events, no violation"
    rules = Counter(v.rule for v in vs)
    names = ", ".join(f"{r} x{k}" if k > 1 else r for r, k in rules.items())
    return f"streamfix [{api}] check: {total} violation{'s' if total != 1 else ''} ({names})"


def where(flow: http.HTTPFlow) -> str:
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def comment(flow: http.HTTPFlow, text: str) -> None:
    flow.comment = f"{flow.comment}\n{text}" if flow.comment else text
