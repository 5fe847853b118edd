"""The client leg's options: their names, help texts and choices, registered and checked
in one place (``addons/repair.py``'s ``load`` and ``configure`` call these).

Every repair rule is a bool option mapped to a :class:`wire.rules.Rules` field; the
policy options (mode, truncation, evidence, kept bodies) sit beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mitmproxy import exceptions

from wire.rules import Rules
from wire.verdict import SOURCES

# option name -> Rules field; the help text is the field's docstring in wire/rules.py
RULE_OPTIONS: dict[str, str] = {
    "streamfix_status": "status",
    "streamfix_item_order": "item_order",
    "streamfix_output_index": "output_index",
    "streamfix_sequence": "sequence",
    "streamfix_usage": "usage",
    "streamfix_schema_fill": "schema_fill",
    "streamfix_terminal_output": "terminal_output",
    "streamfix_response_id": "response_id",
    "streamfix_announce": "announce",
    "streamfix_item_id": "item_id",
    "streamfix_reasoning_summary": "reasoning_summary",
    "streamfix_replay": "replay",
    "streamfix_nonstandard": "nonstandard",
    "streamfix_eof_terminal": "eof_terminal",
    "streamfix_tool_index": "tool_index",
    "streamfix_tool_header": "tool_header",
    "streamfix_finish_reason": "finish_reason",
}
RULE_HELP: dict[str, str] = {
    "status": "Responses: give function_call items a status (in_progress on added, completed on done and in the terminal's output).",
    "item_order": "Responses: close an item still open when the next one is added; drop its late close events.",
    "output_index": "Responses: make output_index dense and equal to the item's position in the final output.",
    "sequence": "Responses: keep sequence_number strictly increasing across inserted and dropped events.",
    "usage": "Responses: give usage integer input_tokens, output_tokens and total_tokens; every API: fill missing "
    "or zero usage counts from the upstream leg's (Devin's).",
    "schema_fill": "Responses: fill required fields the gateway leaves out (created_at, model, item_id, summary_index).",
    "terminal_output": "Responses: list the announced items, in order, in the terminal event's output.",
    "response_id": "Responses: keep response.id the same across lifecycle events.",
    "announce": "Responses: synthesize the output_item.added / content_part.added a gateway left out before an item's first delta.",
    "item_id": "Responses: pin every event of an item (and its done and terminal entries) to the id it was announced with.",
    "reasoning_summary": "Responses: give a reasoning output_item.added without summary an empty summary list.",
    "replay": "Responses, chat: drop a text delta that repeats the whole text already streamed (a full-text replay).",
    "nonstandard": "Responses, chat: turn events the API does not define (ping, keepalive) and empty data events into SSE comments.",
    "eof_terminal": "Responses, chat: end a stream that stops without a terminal with a failure (response.failed, continuing sequence_number; chat: an error chunk), never a success.",
    "tool_index": "Chat: renumber tool_calls[].index 0..n-1 per choice by first appearance.",
    "tool_header": "Chat: do not announce a tool call's name twice when the gateway re-sends its header.",
    "finish_reason": "Chat: map a non-standard finish_reason (CPA's Gemini/Antigravity 'max_tokens', Gemini's "
    "lower-cased 'safety'...) to the spec's value ('length', 'content_filter').",
}
TRUNCATION_CHOICES = ("incomplete", "completed", "off")
MODE_CHOICES = ("repair", "check")


def add_options(loader) -> None:
    """Register every client-leg option."""
    loader.add_option("streamfix", bool, True, "Repair LLM gateway responses (master switch).")
    loader.add_option(
        "streamfix_mode",
        str,
        "repair",
        """'repair' repairs the streams; 'check' changes no byte and reports every
        violation of the stream contract (wire/contract.py) per flow: in the log, the
        flow comment and the receipt.""",
        choices=list(MODE_CHOICES),
    )
    for name, rule in RULE_OPTIONS.items():
        loader.add_option(name, bool, True, RULE_HELP[rule])
    loader.add_option(
        "streamfix_truncation",
        str,
        "incomplete",
        """What a truncation verdict does: 'incomplete' ends a Responses stream with
        response.incomplete (the spec; chat gets finish_reason length, messages
        stop_reason max_tokens, Gemini MAX_TOKENS); 'completed' keeps Responses'
        response.completed (for clients that rather feed the broken call back to the
        model, as Codex does) while the other APIs still report the truncation; 'off'
        rewrites no terminal.""",
        choices=list(TRUNCATION_CHOICES),
    )
    loader.add_option(
        "streamfix_evidence",
        Sequence[str],
        list(SOURCES),
        f"Evidence sources the truncation verdict may use (repeat the option or separate "
        f"with commas): {', '.join(SOURCES)}.",
    )
    loader.add_option(
        "streamfix_keep_bodies",
        bool,
        False,
        """Keep each repaired streamed flow's original and repaired body (for mitmweb's
        views and saved flows). Costs memory per flow; off for a sidecar.""",
    )


def check_choices(opts, updated: set[str]) -> None:
    """Raise :class:`mitmproxy.exceptions.OptionsError` for a choice option set to a value
    it does not take."""
    if "streamfix_mode" in updated and opts.streamfix_mode not in MODE_CHOICES:
        raise exceptions.OptionsError(
            f"streamfix_mode must be one of {', '.join(MODE_CHOICES)}, not {opts.streamfix_mode!r}"
        )
    if "streamfix_truncation" in updated and opts.streamfix_truncation not in TRUNCATION_CHOICES:
        raise exceptions.OptionsError(
            f"streamfix_truncation must be one of {', '.join(TRUNCATION_CHOICES)}, "
            f"not {opts.streamfix_truncation!r}"
        )


def evidence(opts) -> frozenset[str]:
    """The evidence sources named by ``streamfix_evidence``: repeated ``--set
    streamfix_evidence=a --set ...`` or one comma-separated value."""
    names = [n.strip() for v in opts.streamfix_evidence for n in v.split(",") if n.strip()]
    bad = [n for n in names if n not in SOURCES]
    if bad:
        raise exceptions.OptionsError(
            f"unknown streamfix_evidence source(s) {', '.join(map(repr, bad))}; known: {', '.join(SOURCES)}"
        )
    return frozenset(names)


def rules_changed(updated: set[str]) -> bool:
    return bool(updated & (set(RULE_OPTIONS) | {"streamfix_truncation"}))


def rules(opts) -> Rules:
    """The :class:`wire.rules.Rules` the options ask for."""
    return replace(
        Rules(),
        truncation=opts.streamfix_truncation,
        **{rule: getattr(opts, name) for name, rule in RULE_OPTIONS.items()},
    )
