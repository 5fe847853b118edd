"""Which repairs are on, and the per-flow facts repairers need from the request."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

TruncationPolicy = Literal["incomplete", "completed", "off"]


@dataclass(frozen=True, slots=True)
class Rules:
    """One switch per repair rule; all on by default. The addon maps its options here."""

    # /v1/responses
    status: bool = True
    """function_call items get ``status`` (in_progress on added, completed on done/output)."""
    item_order: bool = True
    """An item still open when the next one is added is closed first; late closes dropped."""
    output_index: bool = True
    """``output_index`` dense, equal to the item's position in the final ``output``."""
    sequence: bool = True
    """``sequence_number`` strictly increasing across inserted and dropped events."""
    usage: bool = True
    """``usage`` always has integer input/output/total tokens."""
    schema_fill: bool = True
    """Required fields CPA leaves out (created_at, model, item_id, summary_index...)."""
    terminal_output: bool = True
    """The terminal event's ``output`` lists the announced items, in order (a synthesized
    ``response.failed`` too: an open item as ``incomplete``)."""
    response_id: bool = True
    """``response.id`` stays the same across lifecycle events."""
    announce: bool = True
    """A delta for an item (or content part) never announced gets the ``output_item.added``
    (``content_part.added``) synthesized before it."""
    item_id: bool = True
    """An item's events and its done/terminal entries carry the id it was announced with."""
    reasoning_summary: bool = True
    """A reasoning item without ``summary`` gets one: ``[]`` on ``output_item.added``, what was
    streamed (else ``[]``) on ``output_item.done`` and in the terminal's ``output``."""
    # every API
    replay: bool = True
    """The text sent twice is dropped: a delta, or a second run of deltas (held while it is
    a prefix of the text so far), repeating the whole text already streamed
    (:func:`wire.contract.repeat`)."""
    nonstandard: bool = True
    """Events the API does not define (``event: ping``, ``{"type":"keepalive"}``) and empty
    ``data:`` events become SSE comments (kept, ignored by every client)."""
    eof_terminal: bool = True
    """A stream that ends without a terminal ends with a failure (Responses:
    ``response.failed``, same id, next ``sequence_number``; chat: an error chunk; Messages:
    an ``error`` event; Gemini: an error object)."""
    no_events: bool = True
    """A stream that ends with no event at all (an empty ``200 text/event-stream``, or
    nothing but comments and keep-alives; cindy #2497) ends with a failure the client
    sees: Responses ``response.failed``, chat an error chunk, messages an ``error``
    event, Gemini an ``error`` object; never a success."""
    cr_end: bool = True
    """A CR-only stream (a relay's framing, promptfoo #10109) that ends right after its
    last event's blank line gets one more CR (a blank line, which dispatches nothing):
    parsers that hold a final CR back until they know it is not half of a CRLF drop that
    event at the end otherwise (eventsource-parser 3.1.1, under every AI SDK)."""
    # /v1/chat/completions
    usage_chunk: bool = True
    """The usage chunk after the finish (``stream_options.include_usage``) carrying
    placeholder choices (empty delta, no finish_reason; LiteLLM #28735) gets the spec's
    ``choices: []``."""
    tool_index: bool = True
    """``tool_calls[].index`` renumbered 0..n-1 per choice by first appearance."""
    tool_header: bool = True
    """A re-sent tool-call header does not announce the call's name twice."""
    finish_reason: bool = True
    """A stop reason outside the API's own vocabulary that a gateway translated from another
    API becomes the API's value (chat ``finish_reason``: CPA's Gemini ``max_tokens`` ->
    ``length``, ``safety`` -> ``content_filter``, Anthropic's ``refusal`` ->
    ``content_filter``, ``model_context_window_exceeded``/``pause_turn`` -> ``length``;
    Messages ``stop_reason``, Gemini ``finishReason``, Responses ``incomplete_details.
    reason`` likewise, :mod:`wire.stops`); chat's ``stop``/``tool_calls`` beside a
    ``native_finish_reason`` that says otherwise takes what it says; a Gemini stream that
    ends with the turn's whole usage but no ``finishReason`` gets ``STOP``."""
    # this round's classes (issue 29)
    hidden_failure: bool = True
    """A failure the gateway reported as a success ends as the API's failure
    (:mod:`wire.hidden`): Responses ``response.completed`` without usage from CPA's
    Gemini-family translator -> ``response.failed``; chat ``[DONE]`` with no
    ``finish_reason`` -> an error chunk before it; Messages ``message_stop`` without
    ``message_delta``, or CPA's Antigravity ``message_delta`` that zeroes the usage its
    start counted -> an ``error`` event."""
    usage_math: bool = True
    """Usage that does not add up is made to (:mod:`wire.usage_math`): output without the
    reasoning tokens the total counts, cached above input, negative counts."""
    vendor_events: bool = True
    """Responses: a vendor's own events (``codex.rate_limits``, ``codex.response.metadata``,
    ``responsesapi.*``) become SSE comments, except for the vendor's client (Codex), which
    reads them."""
    # the upstream leg (all APIs)
    upstream_failure: bool = True
    """The provider's call failed (its in-band error, a cut body, no finish: the upstream
    leg's verdict ``failed``) while the gateway reports success: the client's terminal
    becomes its API's failure (``wire/upstream_terminal.py``)."""
    # truncation (all APIs)
    truncation: TruncationPolicy = "incomplete"
    """What a truncation verdict does to a Responses terminal: ``incomplete`` (the spec),
    ``completed`` (keep response.completed), ``off`` (no terminal rewrite on any API)."""


@dataclass(slots=True)
class FlowContext:
    """What the client asked for, as far as repairs need it (never the prompt itself)."""

    model: str | None = None
    started_at: int = field(default_factory=lambda: int(time.time()))
    request: dict[str, Any] | None = None
    """The parsed client request body, for the verdict's caps; None if not JSON."""
    client: str | None = None
    """Which client asked, where a rule needs it (``"codex"``: Codex, from its
    ``originator`` or ``User-Agent`` header; None: another or unknown)."""
