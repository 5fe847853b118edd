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
   hand) and its unit tests beside the API's (tests/wire/test_<api>.py); a defect no
   client recording can show (the upstream leg's) says why in ``unrecorded``;
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
    unrecorded: str = ""
    """Why no recording can show the defect, and which tests hold the rule on and off
    instead (only when :attr:`recordings` is empty)."""

    @property
    def option(self) -> str:
        return f"streamfix_{self.name}"


def rule(
    help: str, *, recordings: tuple[str, ...], contract: tuple[str, ...] = (), fast: str, unrecorded: str = ""
) -> Any:
    """A :class:`Rules` field for one repair rule: on by default, its declaration kept as
    the field's metadata."""
    return field(default=True, metadata={"rule": (help, recordings, contract, fast, unrecorded)})


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
        "Every API: end a stream that stops without a terminal with a failure (response.failed, continuing "
        "sequence_number; chat: an error chunk; messages: an error event; Gemini: an error object), never a success.",
        recordings=("responses-eof-no-terminal", "responses-eof-open-call", "gemini-openai-early-stop"),
        contract=("terminal.present", "gemini.finish"),
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
    block_order: bool = rule(
        "Messages: close a content block still open when the next one starts (LiteLLM's /v1/messages bridge "
        "before 1.108.7 starts a tool_use block before it stops the text block): its content_block_stop, at the "
        "index the client saw, goes out before the new start; the gateway's own late stop for it becomes an SSE "
        "comment. A delta for a block so closed passes as it came (dropping it would lose the model's output).",
        recordings=("messages-litellm-block-order",),
        contract=("messages.block_order",),
        fast=GUARDED + "a delta for a block the rule closed is not taken; starts and stops never are",
    )
    glued_event: bool = rule(
        "Messages: split an event glued onto a half one (LiteLLM's Anthropic pass-through writes its ping or error "
        "right after a cut provider line, no blank line between): an event whose data is not JSON and holds an "
        "event: line after a data: line is cut at that line; the half before it becomes an SSE comment, the rest "
        "is handled as its own event.",
        recordings=("messages-litellm-glued-ping",),
        contract=("sse.glued",),
        fast=NO_DELTA + "events whose data is not JSON (a skimmed delta parses by its layout)",
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
        "Every API: write a stop reason from another API's vocabulary as the API's own (chat finish_reason: CPA's "
        "Gemini 'max_tokens' -> 'length', 'safety' -> 'content_filter', Anthropic's 'refusal' -> 'content_filter', "
        "'model_context_window_exceeded' and 'pause_turn' -> 'length'; Messages stop_reason, Gemini finishReason, "
        "Responses incomplete_details.reason likewise); chat: a 'stop'/'tool_calls' beside a native_finish_reason "
        "that says otherwise takes what it says; Gemini: a stream that ends with the turn's usage but no "
        "finishReason gets STOP.",
        recordings=("chat-gemini-safety-nonstream", "chat-gemini-safety-native"),
        contract=("stop.reason",),
        fast=NO_DELTA + "finish chunks, message_delta, Gemini's finishing chunk, the terminal (and JSON bodies)",
    )
    error_finish: bool = rule(
        "Chat: a finish_reason that names an error ('error' or '..._error': Portkey's Anthropic in-band "
        "'overloaded_error', 'rate_limit_error', 'api_error') ends the stream as a failure: that chunk becomes an "
        "error chunk keeping the gateway's word, the [DONE] after it is withheld (an SSE comment).",
        recordings=("chat-portkey-anthropic-overloaded",),
        contract=("chat.error_finish",),
        fast=NO_DELTA + "finish chunks and [DONE]",
    )
    done_marker: bool = rule(
        "Chat: a stream that had its finish_reason and ends cleanly (at an event boundary, no error) without "
        "data: [DONE] gets one (Portkey's Gemini chat never sends it); never after a failure, never without a "
        "finish (rule eof_terminal), never on a JSON body.",
        recordings=("chat-portkey-gemini-text-tool",),
        contract=("chat.done",),
        fast=NO_DELTA + "the end of the stream",
    )
    tool_finish: bool = rule(
        "Chat: a choice that finishes 'stop' right after whole tool calls (every call's arguments a JSON object, "
        "no content after the last) finishes 'tool_calls' (Portkey writes Gemini's STOP on a function-call turn "
        "as 'stop', and clients that loop on 'tool_calls' end the turn without running the calls); a JSON body: "
        "message.tool_calls with such arguments and 'stop' likewise. Never against a truncation verdict, never "
        "when the client named the function (tool_choice an object: OpenAI itself finishes 'stop' then).",
        recordings=("chat-portkey-gemini-text-tool", "chat-portkey-gemini-parallel"),
        contract=("chat.tool_finish",),
        fast=NO_DELTA + "finish chunks (ChatRepairer._takes records whether a choice's last output was content "
        "or a call)",
    )
    error_last: bool = rule(
        "Chat: after an error chunk this repairer wrote (rules upstream_failure, hidden_failure, error_finish), "
        "the gateway's later data chunks (LiteLLM's usage chunk) are withheld as SSE comments: the failure is the "
        "last thing the client reads.",
        recordings=(),
        unrecorded="the error chunk a gateway's later chunks follow comes from the upstream leg's verdict (rule "
        "upstream_failure: LiteLLM's usage chunk after the failed finish) or a finish chunk no gateway follows "
        "with data; tests/wire/test_chat.py holds it on and off",
        fast=GUARDED + "after an error chunk no chunk is taken",
    )
    # failures a gateway reported as success, usage that does not add up, vendors' events
    hidden_failure: bool = rule(
        "Every API: end a failure the gateway reported as a success as the API's failure: Responses "
        "response.completed without usage from CPA's Gemini-family translator -> response.failed; chat [DONE] with "
        "no finish_reason -> an error chunk before it; Messages message_stop without message_delta, or CPA's "
        "Antigravity message_delta that zeroes the usage its start counted -> an error event; a chat JSON body with id, "
        "model and usage zeroed and no content (CPA #2193: HTTP 200 for no answer) -> HTTP 502 with the error object.",
        # (responses-gemini-completed-no-usage shows it too, but with the rule off rule usage
        # fills the missing usage, after which the contract cannot tell the completion was
        # synthetic: tests/wire/test_matrix_rules.py holds it on and off)
        recordings=(
            "chat-gemini-done-no-finish",
            "messages-gemini-stop-no-delta",
            "messages-antigravity-zeroed-delta",
            "chat-cpa-zeroed-nonstream",
        ),
        contract=("terminal.hidden_failure", "messages.stop"),
        fast=NO_DELTA + "the terminal, [DONE], message_delta and message_stop (wire/hidden.py)",
    )
    usage_math: bool = rule(
        "Every API: make usage add up where the right numbers are known: output that leaves out the reasoning "
        "tokens its total counts gets them, cached tokens above the input are added to it, negative counts become 0.",
        recordings=("chat-gemini-thoughts-usage",),
        contract=("usage.sums",),
        fast=NO_DELTA + "usage objects (terminals, usage chunks, message_delta, usageMetadata; wire/usage_math.py)",
    )
    vendor_events: bool = rule(
        "Responses: turn a vendor's own events (codex.rate_limits, codex.response.metadata, responsesapi.*) into "
        "SSE comments for every client but the vendor's own (Codex keeps them).",
        recordings=("responses-codex-vendor-events",),
        contract=("sse.vendor",),
        fast=NO_DELTA + "events outside response.* (no delta layout matches them)",
    )
    # the upstream leg (all APIs)
    upstream_failure: bool = rule(
        "Every API: when the upstream leg proves the provider's call failed (an in-band error, a cut body, a body "
        "that ended without a finish) and the gateway reports success, end the client's stream as its API's failure "
        "(Responses response.failed, chat an error chunk, messages an error event, Gemini an error object; a JSON "
        "body HTTP 502).",
        recordings=(),
        unrecorded="a client recording alone cannot show it: it needs the upstream leg's verdict (the provider's "
        "own stream beside the client's); tests/wire/test_upstream_decoders.py holds it on and off on every API, "
        "the real-CPA upstream matrix (tests/e2e/test_real_cpa_upstream_matrix) on real builds",
        fast=NO_DELTA + "the terminal (wire/upstream_terminal.py)",
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
            out[f.name] = Rule(f.name, *meta)
    return out


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
