"""The ``flow.response.stream`` callable: the per-read hot path of the client leg.

mitmproxy calls it once per upstream read (and once more with ``b""`` at the end);
everything per flow is prepared before (``addons/repair.py``'s ``responseheaders``), and
everything after the stream (receipt, turn record) hangs off ``on_eof``. Nothing here
imports mitmproxy.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from streamfix.wire.contract import StreamChecker
from streamfix.wire.encoding import Decoder
from streamfix.wire.rules import FlowContext
from streamfix.wire.stream import EventRepairer, StreamRepair
from streamfix.wire.told import Told
from streamfix.wire.verdict import Verdict

from .check import CheckStream, JsonCheck

logger = logging.getLogger("streamfix")

LIVE_INTERVAL = 1.0
"""Seconds between updates of a streamed flow's body in the UIs (kept bodies only)."""
ORIGINAL = "streamfix.original"
"""Flow metadata: the body as the gateway sent it (the flow's body is the repaired one)."""


class BodyRepair:
    """A buffered JSON body's repair, as the turn log sees a repairer: the rules that
    fired (each once per body) and whether anything changed."""

    __slots__ = ("changed", "fired")

    def __init__(self, fired: Counter[str]) -> None:
        self.fired = fired
        self.changed = 0


class FlowState:
    """What the client leg knows of one flow from its request to its end."""

    __slots__ = ("api", "checker", "ctx", "key", "repairer", "resolver", "said", "stream", "verdict")

    def __init__(self, api: str, ctx: FlowContext, verdict: Verdict) -> None:
        self.api = api
        self.ctx = ctx
        self.verdict = verdict
        self.stream: FlowStream | CheckStream | None = None
        self.resolver = verdict.resolver
        """The correlator's resolver (the verdict lets go of it once called): its record
        links this flow to the upstream flow that decided it."""
        self.key = "-"
        """The client key's id or label for the turn log (never the key)."""
        self.repairer: EventRepairer | BodyRepair | None = None
        self.checker: StreamChecker | JsonCheck | None = None
        """Check mode on a buffered body: its contract checker (for the turn record)."""
        self.said: Told | None = None
        """With a turn sink, a buffered body: what the gateway said, read before its repair."""


class FlowStream:
    """The ``flow.response.stream`` callable: decode, repair, never raise, never ``b""``.

    mitmproxy calls it once per upstream read and once more with ``b""`` at the end. An
    exception here would drop the chunk (and hang the client on the final call), so every
    error turns the flow into passthrough of the remaining bytes.
    """

    __slots__ = (
        "decoder",
        "failed",
        "first_at",
        "keep",
        "on_eof",
        "on_progress",
        "original",
        "repair",
        "repaired",
        "said",
        "salvaged",
        "shown",
        "told",
    )  # fmt: skip

    def __init__(self, repair: StreamRepair, decoder: Decoder | None, keep: bool, on_eof, on_progress=None):
        self.repair = repair
        self.decoder = decoder
        self.keep = keep
        self.original: list[bytes] = []
        self.repaired: list[bytes] = []
        self.failed: BaseException | None = None
        self.on_eof = on_eof
        self.on_progress = on_progress
        """With kept bodies: called at most every :data:`LIVE_INTERVAL` seconds while the
        stream runs, so a UI can show what has arrived."""
        self.shown = time.monotonic()
        self.first_at: float | None = None
        """When the first body bytes arrived (time.time()), for the turn log."""
        self.told: Told | None = None
        """With a turn sink (turn log, metrics, traces): what the client is told (wire/told.py)."""
        self.said: Told | None = None
        """With a turn sink: what the gateway said (its ending, against the client's)."""
        self.salvaged = 0
        """Bytes sent by :meth:`salvage` after the upstream failed."""

    def __call__(self, chunk: bytes) -> list[bytes]:
        # a plain stream's reads after the first go to wire.stream.Reads (addons/repair.py)
        eof = chunk == b""
        if self.first_at is None and not eof:
            self.first_at = time.time()
        try:
            if self.decoder is not None:
                chunk = self.decoder.flush() if eof else self.decoder.decode(chunk)
            out = self.repair.feed(chunk) if chunk else b""
            if eof:
                out += self.repair.close()
        except Exception as e:  # noqa: BLE001 - decoding failed: nothing more can be repaired
            self.failed = e
            out = chunk if isinstance(chunk, bytes) else b""
        if self.told is not None:
            try:
                if out:
                    self.told.feed(out)
                if chunk and self.said is not None:
                    self.said.feed(chunk)
            except Exception:  # noqa: BLE001 - the turn log's numbers must never break the stream
                self.told = self.said = None
        if self.keep:
            if chunk:
                self.original.append(chunk)
            if out:
                self.repaired.append(out)
            if not eof and self.on_progress is not None and time.monotonic() - self.shown >= LIVE_INTERVAL:
                self.shown = time.monotonic()
                try:
                    self.on_progress(self)
                except Exception:  # a view update must never break the stream
                    logger.exception("streamfix: error while showing a flow in progress")
        if eof:
            on_eof, self.on_eof = self.on_eof, None
            try:
                if on_eof is not None:
                    on_eof(self)
            except Exception:  # logging must never break the stream
                logger.exception("streamfix: error while finishing a flow")
        return [out] if out else []

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body (``addons/salvage.py`` calls this before mitmproxy
        closes the client connection): what the repairer still holds, repaired as far as a
        cut stream allows (``StreamRepair.salvage``), and the bytes of an unfinished event as
        they came, so a cut upstream loses no event it sent."""
        try:
            out = self.repair.salvage()
            if self.decoder is not None:
                out += self.decoder.flush()
        except Exception as e:  # noqa: BLE001 - fail open: never raise into the stream or the proxy
            self.failed = e
            return []
        if out and self.keep:
            self.repaired.append(out)
        if out and self.told is not None:
            try:
                self.told.feed(out)
            except Exception:  # noqa: BLE001 - as in __call__
                self.told = None
        self.salvaged = len(out)
        return [out] if out else []

    def detach(self) -> None:
        """The flow is over (end of stream, ``response``, ``error``, client abort): drop the
        closure that points back to the flow. Kept, it makes the cycle flow ->
        response.stream -> self -> on_eof -> flow, and every ended flow (with its repairer
        state) would wait for a full garbage collection."""
        self.on_eof = None
        self.on_progress = None
