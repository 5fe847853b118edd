"""A failure the gateway reported as a success, told from the client stream itself (rule
``hidden_failure``; contract rules ``terminal.hidden_failure`` and ``messages.stop``).

When the provider's body ends without its finish (the connection closed, the body was
cut, or an in-band ``{"error": ...}`` frame came, which carries no candidates), CPA's
Gemini-family translators (AI Studio, Vertex; v7.2.x) still end the client's stream as if
it had finished:

- ``/v1/responses`` (v7.2.102 and later): ``response.completed``, its items closed, and
  **no ``usage``**: the synthetic ``finishReason: STOP`` the translator makes of the end of
  the body carries no ``usageMetadata``, while every real finish does. The same stream
  shape from another translator means something else (an OpenAI-compatible provider that
  sent no usage), so the rule looks for the Gemini translator's own ids: the response is
  ``resp_<responseId>`` and every message or reasoning item is ``msg_<response id>_<n>`` /
  ``rs_<response id>_<n>`` (:func:`synthetic_completion`). Told as ``response.failed``.
- ``/v1/chat/completions``: chunks, then ``data: [DONE]`` with no ``finish_reason`` at all
  (the finish is written only with a finishReason); also CPA's Claude, interactions and
  OpenAI-compatible paths when their provider stops without a finish. A chat stream always
  ends each choice with a finish_reason (OpenAI's, and every gateway's that finished):
  told with an error chunk before the ``[DONE]``.
- ``/v1/messages``: ``message_stop`` with no ``message_delta`` before it (no stop_reason;
  often with a block still open). Told as an ``error`` event in its place (CPA's own
  ``error`` event, when one follows, instead).
- ``/v1/messages`` from CPA's Antigravity translator: at the end of a body without a finish
  it writes its own ``message_delta``, ``end_turn`` with ``usage`` ``{"input_tokens": 0,
  "output_tokens": 0}`` (it only keeps usage from the chunk that finishes), then
  ``message_stop``, after a ``message_start`` that counted the input. No finished turn
  zeroes the input its start counted (:func:`synthetic_delta`). Told as an ``error`` event
  in the delta's place, its ``message_stop`` dropped (both dropped when CPA's own ``error``
  event follows).
- ``/v1/chat/completions``, a JSON body (CPA v6.8.55 in front of Claude, intermittent:
  router-for-me/CLIProxyAPI#2193, #2190): HTTP 200 with an empty ``chat.completion``: ``id``
  and ``model`` ``""``, ``created`` 0, every usage count 0, content ``""``, no tool call,
  ``finish_reason: "stop"`` (:func:`zeroed_completion`). No completion ever has an empty id
  and model: told as HTTP 502 with the OpenAI error object, so clients raise (and
  openai-python's and the AI SDK's retries take it).

Each failure event here says what was seen, never content.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = [
    "CHAT_ERROR",
    "COMPLETED_WITHOUT_USAGE",
    "DONE_WITHOUT_FINISH",
    "MESSAGES_ERROR",
    "STOP_WITHOUT_DELTA",
    "SYNTHETIC_DELTA",
    "ZEROED_COMPLETION",
    "failed_response",
    "start_input",
    "synthetic_completion",
    "synthetic_delta",
    "zeroed_completion",
]

_ITEM_ID: Final = re.compile(r"(?:msg|rs)_(.+)_\d+")

COMPLETED_WITHOUT_USAGE: Final = (
    "response.completed without usage from CPA's Gemini-family translator (a synthetic STOP): the provider's "
    "body ended without a finish (cut, or an in-band error)"
)
DONE_WITHOUT_FINISH: Final = "data: [DONE] with no finish_reason: the upstream stream ended without a finish"
STOP_WITHOUT_DELTA: Final = (
    "message_stop without message_delta (no stop_reason): the upstream stream ended without a finish"
)


SYNTHETIC_DELTA: Final = (
    "message_delta end_turn with usage 0/0 after a message_start that counted the input (CPA's Antigravity "
    "translator's own end): the upstream stream ended without a finish"
)


ZEROED_COMPLETION: Final = (
    "HTTP 200 with an empty chat.completion (id and model empty, created 0, usage all zero, no content or tool "
    "call): the gateway answered without a completion"
)


def _zero(v: Any) -> bool:
    return type(v) is int and v == 0


def start_input(obj: Any) -> int:
    """``message_start``'s ``message.usage.input_tokens`` (0 when absent)."""
    msg = obj.get("message") if isinstance(obj, dict) else None
    usage = msg.get("usage") if isinstance(msg, dict) else None
    n = usage.get("input_tokens") if isinstance(usage, dict) else None
    return n if type(n) is int and n > 0 else 0


def synthetic_delta(obj: Any, counted_input: int) -> bool:
    """Is this ``message_delta`` CPA's Antigravity translator's end of a body without a
    finish (see the module docstring)? ``counted_input``: :func:`start_input` of the
    stream's ``message_start``."""
    if counted_input <= 0 or not isinstance(obj, dict):
        return False
    delta, usage = obj.get("delta"), obj.get("usage")
    if not isinstance(delta, dict) or delta.get("stop_reason") != "end_turn" or not isinstance(usage, dict):
        return False
    return set(usage) == {"input_tokens", "output_tokens"} and all(_zero(v) for v in usage.values())


def synthetic_completion(resp: Any, item_ids: list[Any]) -> bool:
    """Is this ``response.completed``'s response object the Gemini-family translator's
    synthetic end (see the module docstring)? ``item_ids``: the ids of the stream's message
    and reasoning items."""
    if not isinstance(resp, dict) or resp.get("usage") is not None:
        return False
    rid = resp.get("id")
    if not isinstance(rid, str) or not rid.startswith("resp_"):
        return False
    for iid in item_ids:
        m = _ITEM_ID.fullmatch(iid) if isinstance(iid, str) else None
        if m is None or m.group(1) != rid:
            return False
    return True


def zeroed_completion(body: Any) -> bool:
    """Is this ``chat.completion`` body the empty one of the module docstring? ``id`` and
    ``model`` exactly ``""``, ``created`` 0 (or absent), each usage count 0 (or no usage),
    and no choice with content, reasoning, a refusal or a tool call."""
    if not isinstance(body, dict) or body.get("id") != "" or body.get("model") != "":
        return False
    created = body.get("created")
    if created is not None and not _zero(created):
        return False
    usage = body.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            return False
        if not all(_zero(usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")):
            return False
    choices = body.get("choices")
    if not isinstance(choices, list):
        return False
    for ch in choices:
        msg = ch.get("message") if isinstance(ch, dict) else None
        if not isinstance(msg, dict):
            return False
        if msg.get("content") not in (None, "") or msg.get("tool_calls") or msg.get("refusal"):
            return False
        if msg.get("reasoning_content") or msg.get("function_call"):
            return False
    return True


def failed_response(resp: dict[str, Any]) -> None:
    """Make a ``response.completed`` response object the failure it was (in place)."""
    resp["status"] = "failed"
    resp["error"] = {"code": "server_error", "message": "The upstream stream ended without a finish."}
    if "incomplete_details" in resp:
        resp["incomplete_details"] = None


CHAT_ERROR: Final = {
    "error": {
        "message": "The upstream stream ended without a finish_reason.",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}
"""The error chunk a chat stream that failed gets (OpenAI's mid-stream error object)."""

MESSAGES_ERROR: Final = {
    "type": "error",
    "error": {"type": "api_error", "message": "The upstream stream ended without a stop_reason."},
}
"""The ``error`` event a Messages stream that failed gets (Anthropic's mid-stream error)."""
