"""An upstream failure in each client API's own shape (rule ``upstream_failure``).

When the upstream leg proves that the provider's call failed (an in-band error frame, a
body cut or one that ended without the provider's finish: :class:`wire.upstream_call
.CallResult` outcome ``failed``) while the gateway reports a success, the client's terminal
becomes the failure its API defines, with the upstream evidence as its message:

- Responses (SSE and WebSocket): the terminal event becomes ``response.failed``, same
  response (id, output, usage), ``status: "failed"``, ``error: {code: "server_error",
  message}``, ``incomplete_details: null``; ``sequence_number`` as it was.
- chat: the finish chunk becomes the error chunk OpenAI sends mid-stream, ``{"error":
  {message, type: "server_error", param: null, code: null}}``, and ``[DONE]`` is dropped
  (openai-python raises ``APIError`` on it; the AI SDK reports an error part).
- messages: ``message_delta`` becomes Anthropic's ``event: error`` (``overloaded_error``
  when the provider said it was overloaded or unavailable, so Claude Code retries; else
  ``api_error``) and ``message_stop`` is dropped.
- Gemini: the finishing chunk becomes the API's error object ``{"error": {code, message,
  status}}``.
- A JSON body (any API): HTTP 502 with that API's error object.

These are the only shapes this module builds; the repairers call them at their terminal,
where the verdict is decided.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "chat_error",
    "failure_message",
    "gemini_error",
    "json_failure",
    "messages_error",
    "overloaded",
    "responses_failed",
]


def failure_message(detail: str) -> str:
    return f"The upstream provider failed: {detail}."


def overloaded(detail: str) -> bool:
    """Did the provider say it was overloaded or unavailable (a retry may succeed)?"""
    d = detail.lower()
    return any(w in d for w in (" 503", " 529", " 429", "unavailable", "overloaded", "resource_exhausted"))


def responses_failed(resp: dict[str, Any], detail: str) -> None:
    """A Responses terminal's ``response`` object, made the failure's (in place)."""
    resp["status"] = "failed"
    resp["error"] = {"code": "server_error", "message": failure_message(detail)}
    resp["incomplete_details"] = None


def chat_error(detail: str) -> dict[str, Any]:
    return {"error": {"message": failure_message(detail), "type": "server_error", "param": None, "code": None}}


def messages_error(detail: str) -> dict[str, Any]:
    kind = "overloaded_error" if overloaded(detail) else "api_error"
    return {"type": "error", "error": {"type": kind, "message": failure_message(detail)}}


def gemini_error(detail: str) -> dict[str, Any]:
    if overloaded(detail):
        return {"error": {"code": 503, "message": failure_message(detail), "status": "UNAVAILABLE"}}
    return {"error": {"code": 500, "message": failure_message(detail), "status": "INTERNAL"}}


def json_failure(api: str, detail: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for a non-streaming response of ``api`` whose upstream failed."""
    if api == "messages":
        return 502, messages_error(detail)
    if api == "gemini":
        return 502, gemini_error(detail)
    return 502, chat_error(detail)  # Responses and chat: the OpenAI error object
