"""What each turn of the real-CPA matrix really was, in every client API's terms, and
whether a stream tells it.

The provider's own body is the ground truth of a cell: the fake said how the turn ended
(``fake_providers.SCRIPTS``). :func:`truth` is that ending as the client's API says it:
Responses ``completed`` / ``incomplete:<reason>`` / a failure, chat's ``finish_reason`` or
an error, Messages' ``stop_reason`` or an ``error`` event, Gemini's ``finishReason`` or an
error object. :func:`told` says whether a stream's outcome (``realcpa_matrix.outcome``)
tells it. A cell whose truth the client stream cannot show at all (CPA dropped every trace
of it) is in :data:`HIDDEN`, with why: only the upstream leg can tell those.
"""

from __future__ import annotations

from typing import Any

FAILURE = "failure"
"""The turn failed (an in-band error, a body cut or ended without its finish): any failure
of the API is the truth told (Responses ``response.failed`` or ``error``, chat an error chunk,
Messages an ``error`` event, Gemini an error object, an HTTP error status, a WebSocket
closed before a terminal)."""

_ENDINGS: dict[str, dict[str, str]] = {
    # turn -> client API -> the ending that tells it
    "text_tool": {"responses": "completed", "chat": "tool_calls", "messages": "tool_use", "gemini": "STOP"},
    "parallel": {"responses": "completed", "chat": "tool_calls", "messages": "tool_use", "gemini": "STOP"},
    "thoughts": {"responses": "completed", "chat": "stop", "messages": "end_turn", "gemini": "STOP"},
    "zero_items": {"responses": "completed", "chat": "stop", "messages": "end_turn", "gemini": "STOP"},
    "vendor": {"responses": "completed", "chat": "stop", "messages": "end_turn", "gemini": "STOP"},
    "max_tokens": {
        "responses": "incomplete:max_output_tokens",
        "chat": "length",
        "messages": "max_tokens",
        "gemini": "MAX_TOKENS",
    },
    "safety": {
        "responses": "incomplete:content_filter",
        "chat": "content_filter",
        "messages": "refusal",
        "gemini": "SAFETY",
    },
    # Anthropic's refusal stop; an OpenAI refusal (a refusal part, finish stop) is below
    "refusal": {
        "responses": "incomplete:content_filter",
        "chat": "content_filter",
        "messages": "refusal",
        "gemini": "SAFETY",
    },
    "context_window": {
        "responses": "incomplete:max_output_tokens",
        "chat": "length",
        "messages": "model_context_window_exceeded",
        "gemini": "MAX_TOKENS",
    },
    # pause_turn: an unfinished turn to be continued; the spec's words for unfinished
    # (docs/real-cpa.md, "pause_turn")
    "pause": {
        "responses": "incomplete:max_output_tokens",
        "chat": "length",
        "messages": "pause_turn",
        "gemini": "MAX_TOKENS",
    },
    # the budget ran out right after a whole call (its arguments parse): still a cut turn
    "cap_call": {
        "responses": "incomplete:max_output_tokens",
        "chat": "length",
        "messages": "max_tokens",
        "gemini": "MAX_TOKENS",
    },
}
_OPENAI_REFUSAL = {"responses": "completed", "chat": "stop", "messages": "refusal", "gemini": "SAFETY"}
"""An OpenAI refusal (Codex's refusal content part, chat's ``refusal`` delta) ends a turn
normally in OpenAI's own APIs; Messages and Gemini say a refusal with their stop values."""
_FAILED = ("inband_error", "error_first", "no_finish", "cut_body", "done_no_finish")


def truth(path: str, api: str, turn: str) -> str:
    """The ending that tells the cell's turn in ``api``'s terms (``FAILURE``: any failure)."""
    wire = "responses" if api == "responses-ws" else api
    if turn in _FAILED:
        return FAILURE
    if turn == "context_window" and path == "codex":  # the Codex backend fails the turn
        return FAILURE
    if turn == "refusal" and path in ("codex", "openai"):
        return _OPENAI_REFUSAL[wire]
    return _ENDINGS[turn][wire]


def is_failure(ending: str) -> bool:
    return ending.startswith(("failed", "error", "http ")) or ",error" in ending


def told(path: str, api: str, turn: str, outcome: dict[str, Any], transport_ended: str = "clean") -> bool:
    """Does a stream with this outcome tell the cell's truth?"""
    want = truth(path, api, turn)
    ending = outcome["ending"]
    if want == FAILURE:
        if api == "responses-ws" and transport_ended == "closed" and not ending.startswith(("completed", "incomplete")):
            return True  # the socket closed before a terminal: Codex reports the turn failed
        return is_failure(ending)
    if api == "gemini":
        ending = ending.split(",")[-1]  # CPA may send a finishReason on more than one chunk
    return ending == want


_CLAUDE_RESPONSES = (
    "CPA's Claude -> Responses translator drops message_delta and its stop_reason (both builds): the stream is, "
    "byte for byte, a normal end_turn turn"
)
_CLAUDE_GEMINI = "CPA's Claude -> Gemini translator writes STOP whatever the stop_reason; nothing else carries it"
_CLAUDE_CHAT = (
    "CPA's Claude -> chat translator writes stop for every stop_reason but tool_use and max_tokens (and refusal, on "
    "v7.2.140), with no native_finish_reason"
)
_GEMINI_RESPONSES = (
    "CPA's Gemini (and Antigravity) -> Responses translator ends every finishReason as response.completed, with usage: a SAFETY stop "
    "reads as a short normal answer"
)
_GEMINI_FAMILY = ("gemini", "vertex", "antigravity")
_GEMINI_MESSAGES_SAFETY = (
    "CPA's Gemini (and Antigravity) -> Claude translator writes end_turn for SAFETY; nothing else carries it"
)
_GEMINI_MESSAGES_EMPTY = (
    "a STOP with no parts reaches /v1/messages as message_start and then the end of the stream: the bytes of a stream "
    "cut after message_start, which the sidecar ends with an error event (the safe reading of them)"
)
_OPENAI_EMPTY_140 = (
    "v7.2.140 only: its OpenAI -> Responses translator writes no event for a turn without text or a call delta (a "
    "refusal alone, or nothing), and CPA's handler ends it with an error event: the provider's normal stop is gone, "
    "and the sidecar never turns a failure into a success"
)
HIDDEN: dict[tuple[str, str, str], str] = {
    **{
        ("claude", a, t): _CLAUDE_RESPONSES
        for a in ("responses", "responses-ws")
        for t in ("refusal", "context_window", "pause")
    },
    **{("claude", "gemini", t): _CLAUDE_GEMINI for t in ("refusal", "context_window", "pause")},
    ("claude", "chat", "context_window"): _CLAUDE_CHAT,
    ("claude", "chat", "pause"): _CLAUDE_CHAT,
    ("claude", "chat", "refusal"): "v7.2.89 only: " + _CLAUDE_CHAT + " (v7.2.140 writes content_filter)",
    ("codex", "gemini", "refusal"): "CPA's Codex -> Gemini translator handles no response.refusal.delta: the refusal "
    "is gone and the turn ends as an empty normal one",
    ("codex", "messages", "refusal"): "CPA's Codex -> Claude translator handles no response.refusal.delta: the refusal "
    "is gone and the turn ends as an empty end_turn",
    **{(p, a, "safety"): _GEMINI_RESPONSES for p in _GEMINI_FAMILY for a in ("responses", "responses-ws")},
    **{(p, "messages", "safety"): _GEMINI_MESSAGES_SAFETY for p in _GEMINI_FAMILY},
    **{(p, "messages", "zero_items"): _GEMINI_MESSAGES_EMPTY for p in ("gemini", "vertex")},
    ("antigravity", "messages", "zero_items"): "v7.2.89 only: " + _GEMINI_MESSAGES_EMPTY + " (v7.2.140's Antigravity "
    "-> Claude translator writes an empty text block and end_turn)",
    ("openai", "gemini", "error_first"): "v7.2.89 only: CPA's OpenAI -> Gemini translator puts finishReason STOP on "
    "its first chunk; a provider failure before any content leaves that chunk alone, the bytes of an empty turn "
    "(v7.2.140 sends an error event after it)",
    ("openai", "gemini", "refusal"): "CPA's OpenAI -> Gemini translator drops the refusal delta: an empty STOP turn",
    ("openai", "messages", "refusal"): "CPA's OpenAI -> Claude translator drops the refusal delta and writes end_turn",
    ("openai", "messages", "safety"): "CPA's OpenAI -> Claude translator writes end_turn for content_filter",
    **{("openai", a, t): _OPENAI_EMPTY_140 for a in ("responses", "responses-ws") for t in ("refusal", "zero_items")},
    **{
        ("openai", a, "safety"): "v7.2.89 only: its OpenAI -> Responses translator ends content_filter as "
        "response.completed (v7.2.140 writes response.incomplete, content_filter)"
        for a in ("responses", "responses-ws")
    },
}
"""(path, client API, turn) -> why the client stream cannot show the cell's truth (both builds
unless the reason names one): CPA dropped every trace of it, so only the upstream leg can
tell it. tests/addons/test_real_cpa_matrix.py keeps it exact: every cell not told true is here, and
every entry has a cell not told true."""
