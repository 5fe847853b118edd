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
}
_OPENAI_REFUSAL = {"responses": "completed", "chat": "stop", "messages": "refusal", "gemini": "SAFETY"}
"""An OpenAI refusal (Codex's refusal content part, chat's ``refusal`` delta) ends a turn
normally in OpenAI's own APIs; Messages and Gemini say a refusal with their stop values."""
_FAILED = ("inband_error", "error_first", "no_finish", "cut_body")


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


HIDDEN: dict[tuple[str, str, str], str] = {}
"""(path, client API, turn) -> why the client stream cannot show the cell's truth (both builds
unless the reason names one). Filled from the live run (tests/test_real_cpa_matrix.py keeps
it exact: every cell not told true is here, and nothing here is told true)."""
