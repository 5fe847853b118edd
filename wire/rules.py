"""The repair rules, each declared once, and the per-flow facts repairers need from the request.

Every switchable repair is a field of :class:`Rules` declared with :func:`rule`: its
option's help text, the recordings that show the defect it repairs (and the contract
rules that defect breaks), and how the fast path (the common deltas read without a parse,
:mod:`wire.skim`) keeps off what it changes. Everything else is derived from that one
declaration: the ``streamfix_<name>`` option, its help and ``--help``/``--options``
(addons/options.py), the startup line's count of rules on, the offline checker's and the
tests' lists; tests/wire/test_rules.py holds every declaration to it (an option with the
help, the rule on and off on each recording, the same bytes with skimming on and off).

How to add a rule:

1. declare it here: ``name: bool = rule(help, recordings=(...), contract=(...), fast=...)``;
2. write its logic in the API's repairer (read it as ``self.rules.name``; count what it
   changes with ``self.fire("name")``) and, when it rewrites deltas, guard the fast path
   (the repairer's ``_takes_delta``/``_takes``: an event the rule could change takes the
   full path), saying how in ``fast``;
3. add a recording that shows the defect (``recordings/``, its expected body checked by
   hand) and its unit tests beside the API's (tests/wire/test_<api>.py);
4. list it in README's tables (the options table; the defect table it answers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

TruncationPolicy = Literal["incomplete", "completed", "off"]

NO_DELTA = "no delta: "
"""A ``fast`` statement's head: the rule changes no event the fast path takes (it takes
text, arguments and summary deltas only), so nothing there needs guarding; the rest says
which events it does change."""
GUARDED = "guarded: "
"""A ``fast`` statement's head: the fast path hands the events the rule could change to the
full path; the rest says how."""
APPLIED = "applied: "
"""A ``fast`` statement's head: the fast path applies the rule itself; the rest says where."""


class Rule(NamedTuple):
    """One rule's declaration (:func:`rule`), read back with :func:`declared`."""

    name: str
    help: str
    """The option's help: which APIs, and what the rule does."""
    recordings: tuple[str, ...]
    """Recordings whose defect this rule repairs: repaired they are their expected body;
    with the rule off they are not."""
    contract: tuple[str, ...]
    """The contract rules (wire/contract.py) the defect breaks in the stream recordings,
    with the rule off; none for a defect the contract does not name."""
    fast: str
    """How the fast path keeps off what the rule changes: :data:`NO_DELTA`,
    :data:`GUARDED` or :data:`APPLIED` and the reason."""

    @property
    def option(self) -> str:
        return f"streamfix_{self.name}"


def rule(help: str, *, recordings: tuple[str, ...], contract: tuple[str, ...] = (), fast: str) -> Any:
    """A :class:`Rules` field for one repair rule: on by default, its declaration kept as
    the field's metadata."""
    return field(default=True, metadata={"rule": (help, recordings, contract, fast)})


@dataclass(frozen=True, slots=True)
class Rules:
    """One switch per repair rule; all on by default. The addon maps its options here."""

    # /v1/responses
    status: bool = rule(
        "Responses: give function_call items a status (in_progress on added, completed on done and in the "
        "terminal's output).",
        recordings=("responses-devin-toolcall", "responses-devin-nonstream"),
        contract=("function_call.status",),
        fast=NO_DELTA + "output_item.added/.done and the terminal's output",
    )
    item_order: bool = rule(
        "Responses: close an item still open when the next one is added; drop its late close events.",
        recordings=("responses-claude-text-then-tool", "responses-claude-text-tool-text", "responses-devin-two-calls"),
        contract=("item.order",),
        fast=GUARDED + "a delta is taken only for an open item that is no continuation",
    )
    output_index: bool = rule(
        "Responses: make output_index dense and equal to the item's position in the final output.",
        recordings=("responses-claude-thinking-text-tool",),
        contract=("item.output_index",),
        fast=GUARDED + "a delta is taken only when its output_index is its item's",
    )
    sequence: bool = rule(
        "Responses: keep sequence_number strictly increasing across inserted and dropped events.",
        recordings=("responses-failed-sequence-restart", "responses-claude-text-then-tool"),
        contract=("response.sequence",),
        fast=APPLIED + "a taken delta is renumbered as a parsed one (ResponsesRepairer._renumber)",
    )
    usage: bool = rule(
        "Responses: give usage integer input_tokens, output_tokens and total_tokens; every API: fill missing "
        "or zero usage counts from the upstream leg's (Devin's).",
        recordings=("responses-devin-emptyusage",),
        contract=("terminal.usage",),
        fast=NO_DELTA + "terminals and usage chunks",
    )
    schema_fill: bool = rule(
        "Responses: fill required fields the gateway leaves out (created_at, model, item_id, summary_index).",
        recordings=("responses-devin-toolcall", "responses-claude-text-then-tool", "responses-devin-nonstream"),
        contract=("response.fields", "reasoning.fields"),
        fast=GUARDED + "a delta without its item_id, output_index or content_index is not taken; a summary "
        "delta's filled ids are learned as its layout's template",
    )
    terminal_output: bool = rule(
        "Responses: list the announced items, in order, in the terminal event's output (a synthesized "
        "response.failed too, an open item as incomplete).",
        recordings=("responses-claude-text-tool-text", "responses-eof-open-call"),
        contract=("terminal.output",),
        fast=NO_DELTA + "the terminal event",
    )
    response_id: bool = rule(
        "Responses: keep response.id the same across lifecycle events.",
        recordings=("responses-failed-sequence-restart",),
        contract=("response.id",),
        fast=NO_DELTA + "lifecycle and terminal events",
    )
    announce: bool = rule(
        "Responses: synthesize the output_item.added / content_part.added a gateway left out before an item's "
        "first delta.",
        recordings=("responses-litellm-unannounced",),
        contract=("item.announced",),
        fast=GUARDED + "a delta is taken only for an announced item and part",
    )
    item_id: bool = rule(
        "Responses: pin every event of an item (and its done and terminal entries) to the id it was announced with.",
        recordings=("responses-copilot-rotating-ids",),
        contract=("item.id",),
        fast=GUARDED + "a delta is taken only when its item_id is the announced one",
    )
    reasoning_summary: bool = rule(
        "Responses: give a reasoning item without summary one (output_item.added: [], output_item.done and the "
        "terminal's output: what was streamed into it, else []).",
        recordings=("responses-reasoning-no-summary", "responses-reasoning-no-summary-done"),
        contract=("reasoning.summary",),
        fast=NO_DELTA + "output_item.added/.done and the terminal's output",
    )
    # other gateways' and relays' defects (LiteLLM, Copilot, relays): every API the help names
    replay: bool = rule(
        "Responses, chat: drop the text sent twice: a delta, or a second run of deltas (held while it is a "
        "prefix of the text so far, released at the first divergence), that repeats the whole text already "
        "streamed.",
        recordings=("responses-litellm-text-twice", "chat-litellm-text-twice", "chat-litellm-text-replay"),
        contract=("text.replay",),
        fast=GUARDED + "a delta that agrees with the text's beginning, or one while deltas are held, is not taken",
    )
    nonstandard: bool = rule(
        "Responses, chat: turn events the API does not define (ping, keepalive) and empty data events into SSE "
        "comments.",
        recordings=("responses-keepalive-ping",),
        contract=("sse.nonstandard", "sse.empty_data"),
        fast=NO_DELTA + "events the API does not define (no delta layout matches them)",
    )
    eof_terminal: bool = rule(
        "Responses, chat: end a stream that stops without a terminal with a failure (response.failed, "
        "continuing sequence_number; chat: an error chunk), never a success.",
        recordings=("responses-eof-no-terminal", "responses-eof-open-call"),
        contract=("terminal.present",),
        fast=NO_DELTA + "the end of the stream",
    )
    no_events: bool = rule(
        "Every API: end a stream that carried no event at all (an empty 200 event stream, or only comments and "
        "keep-alives) with the API's failure event (Responses response.failed, chat an error chunk, messages an "
        "error event, Gemini an error object), never a blank success.",
        recordings=("responses-empty-stream", "chat-empty-stream", "messages-empty-stream", "gemini-empty-stream"),
        contract=("terminal.present",),
        fast=NO_DELTA + "the end of a stream that had no event",
    )
    usage_chunk: bool = rule(
        "Chat: give the usage chunk after the finish (stream_options.include_usage) the spec's choices: [] when "
        "it carries placeholder choices (empty delta, no finish_reason).",
        recordings=("chat-litellm-usage-choices",),
        contract=("chat.usage_chunk",),
        fast=GUARDED + "after a finish no chunk is taken",
    )
    cr_end: bool = rule(
        "Every API: end a CR-only stream (a relay's framing) that stops right after its last event with one more "
        "CR (a blank line), so parsers holding a final CR back as a possible CRLF (eventsource-parser, under "
        "every AI SDK) do not drop that event.",
        recordings=("chat-relay-cr-only", "gemini-relay-cr-only"),
        contract=("sse.cr_end",),
        fast=NO_DELTA + "the stream's last bytes (the driver adds them)",
    )
    # /v1/chat/completions
    tool_index: bool = rule(
        "Chat: renumber tool_calls[].index 0..n-1 per choice by first appearance.",
        recordings=("chat-devin-index1", "chat-devin-truncated-toolcall"),
        contract=("chat.tool_index",),
        fast=APPLIED + "a taken call's arguments chunk gets its call's number (ChatRepairer._takes); a new "
        "call is not taken",
    )
    tool_header: bool = rule(
        "Chat: do not announce a tool call's name twice when the gateway re-sends its header.",
        recordings=("chat-devin-late-header",),
        contract=("chat.tool_name",),
        fast=GUARDED + "a chunk with a call's id or name (a header) is not taken",
    )
    finish_reason: bool = rule(
        "Chat: map a non-standard finish_reason (CPA's Gemini/Antigravity 'max_tokens', Gemini's lower-cased "
        "'safety'...) to the spec's value ('length', 'content_filter').",
        recordings=("chat-gemini-safety-nonstream",),
        fast=NO_DELTA + "the finish chunk (and JSON bodies)",
    )
    # truncation (all APIs): a policy, not a switch (streamfix_truncation, addons/options.py)
    truncation: TruncationPolicy = "incomplete"
    """What a truncation verdict does to a Responses terminal: ``incomplete`` (the spec),
    ``completed`` (keep response.completed), ``off`` (no terminal rewrite on any API)."""


def declared() -> dict[str, Rule]:
    """Every rule's declaration, by name, in :class:`Rules`' order."""
    out = {}
    for f in fields(Rules):
        meta = f.metadata.get("rule")
        if meta is not None:
            help, recordings, contract, fast = meta
            out[f.name] = Rule(f.name, help, recordings, contract, fast)
    return out


@dataclass(slots=True)
class FlowContext:
    """What the client asked for, as far as repairs need it (never the prompt itself)."""

    model: str | None = None
    started_at: int = field(default_factory=lambda: int(time.time()))
    request: dict[str, Any] | None = None
    """The parsed client request body, for the verdict's caps; None if not JSON."""
