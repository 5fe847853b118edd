"""The failure a stream gets when the upstream sent no event at all (rule ``no_events``).

A ``200 text/event-stream`` whose body is empty, or holds nothing but SSE comments and
keep-alives, tells a client nothing: most treat the end of the body as the end of a
(blank) answer, i.e. a success (cindy #2497 turns it into a 502 for that reason; once
the headers are out, a proxy can only add an event, stacklok/toolhive #5292). The
repairer appends the API's own mid-stream failure, built here, so the client reports an
error:

- Responses: ``response.failed``, ``sequence_number`` 0 (the first event of the stream),
  ``status: "failed"``, ``error.code: "server_error"``, ``output: []``, ``usage: null``;
  ``id`` is null (the upstream never named a response; no id is invented), ``created_at``
  the request's time, ``model`` the one asked for.
- chat: an error chunk as OpenAI sends one mid-stream (the shape rule ``eof_terminal``
  uses): ``{"error": {"message", "type": "server_error", "param": null, "code": null}}``.
- messages: Anthropic's ``event: error`` with ``{"type": "error", "error": {"type":
  "api_error", "message"}}`` (its documented mid-stream error event).
- Gemini: the API's error object, ``{"error": {"code": 500, "message", "status":
  "INTERNAL"}}`` (google.rpc.Status as the REST API sends it; a stream carries it as one
  more ``data:`` event).
"""

from __future__ import annotations

from typing import Any

import orjson

from .rules import FlowContext
from .sse import format_event

MESSAGE = "The upstream sent no event: the stream was empty."


def no_events_failure(api: str, ctx: FlowContext, eol: bytes = b"\n") -> bytes:
    """The failure event for an empty stream of ``api``, in the stream's line end."""
    obj: dict[str, Any]
    name: str | None = None
    if api == "responses":
        name = "response.failed"
        obj = {
            "type": name,
            "sequence_number": 0,
            "response": {
                "id": None,
                "object": "response",
                "created_at": ctx.started_at,
                "status": "failed",
                "error": {"code": "server_error", "message": MESSAGE},
                "incomplete_details": None,
                "model": ctx.model,
                "output": [],
                "usage": None,
            },
        }
    elif api == "chat":
        obj = {"error": {"message": MESSAGE, "type": "server_error", "param": None, "code": None}}
    elif api == "messages":
        name = "error"
        obj = {"type": "error", "error": {"type": "api_error", "message": MESSAGE}}
    elif api == "gemini":
        obj = {"error": {"code": 500, "message": MESSAGE, "status": "INTERNAL"}}
    else:
        raise ValueError(f"unknown API {api!r}")
    return format_event(orjson.dumps(obj), event=name, eol=eol)
