"""What a stream tells the client about token usage, in one shape for every API (sans-IO).

The turn log records the counts the client received next to the upstream's own. Each
API spells them differently; :func:`usage_of` reads one event's (or one JSON body's)
usage into ``input_tokens`` (the whole input, cached part included), ``output_tokens``,
``cached_tokens`` and ``total_tokens``:

* Responses: ``response.usage`` of the terminal event (``usage`` of a JSON body):
  ``input_tokens``, ``output_tokens``, ``total_tokens``, ``input_tokens_details.
  cached_tokens``.
* chat: ``usage``: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``,
  ``prompt_tokens_details.cached_tokens``.
* messages: ``message.usage`` of ``message_start`` and ``usage`` of ``message_delta``
  (or of a JSON body): ``input_tokens`` is the uncached part, so input = ``input_tokens``
  + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``; cached = the reads;
  total = input + output.
* Gemini: ``usageMetadata``: ``promptTokenCount`` (cached included),
  ``candidatesTokenCount`` (+ ``thoughtsTokenCount``), ``totalTokenCount``,
  ``cachedContentTokenCount``.

:class:`UsageReader` follows a repaired stream: it looks at an output chunk only when the
bytes ``"usage`` occur in it (the key of every API's usage object: ``"usage"``,
``"usageMetadata"``; one ``bytes.find``, and one ``endswith`` to see that the chunk ends on
an event boundary), so a stream pays for the one or two events that carry usage (the
shorter ``sage`` also matched every ``"message"`` item and Anthropic event type). Later reports win key by key (messages: input from
``message_start``, output from ``message_delta``).
"""

from __future__ import annotations

from typing import Any

import orjson

from .sse import SseParser

__all__ = ["UsageReader", "usage_of"]


def _n(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


_OPENAI = {
    "responses": ("input_tokens", "output_tokens", "input_tokens_details"),
    "chat": ("prompt_tokens", "completion_tokens", "prompt_tokens_details"),
}
"""OpenAI's two spellings: input, output and details field names."""


def usage_of(api: str, obj: Any) -> dict[str, int] | None:
    """The usage counts one event or JSON body reports (only the keys it has), or None."""
    if not isinstance(obj, dict):
        return None
    out: dict[str, int | None]
    if api in _OPENAI:
        inp, outp, details = _OPENAI[api]
        u = obj.get("usage") if "usage" in obj or api == "chat" else _dict(obj.get("response")).get("usage")
        if not isinstance(u, dict):
            return None
        out = {"input_tokens": _n(u.get(inp)), "output_tokens": _n(u.get(outp)), "total_tokens": _n(u.get("total_tokens")),
               "cached_tokens": _n(_dict(u.get(details)).get("cached_tokens"))}  # fmt: skip
    elif api == "messages":
        u = obj.get("usage") if "usage" in obj else _dict(obj.get("message")).get("usage")
        if not isinstance(u, dict):
            return None
        parts = [_n(u.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
        out = {"input_tokens": sum(p for p in parts if p) if parts[0] is not None else None,
               "output_tokens": _n(u.get("output_tokens")), "cached_tokens": parts[1]}  # fmt: skip
    elif api == "gemini":
        u = obj.get("usageMetadata")
        if not isinstance(u, dict):
            return None
        cand, thoughts = _n(u.get("candidatesTokenCount")), _n(u.get("thoughtsTokenCount"))
        out = {"input_tokens": _n(u.get("promptTokenCount")),
               "output_tokens": None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0),
               "total_tokens": _n(u.get("totalTokenCount")), "cached_tokens": _n(u.get("cachedContentTokenCount"))}  # fmt: skip
    else:
        return None
    found = {k: v for k, v in out.items() if v is not None}
    return found or None


_USAGE = b'"usage'
"""What marks an event that may carry usage (see the module docstring)."""


class UsageReader:
    """Follows the bytes a client receives and keeps the usage they report (see the
    module docstring). :attr:`counts` is None until some usage was seen."""

    __slots__ = ("_counts", "_tail", "api")

    def __init__(self, api: str) -> None:
        self.api = api
        self._counts: dict[str, int] = {}
        self._tail = b""
        """The unfinished last event of a chunk (rare: repaired output is whole events,
        except after a repairer failed open)."""

    def feed(self, out: bytes) -> None:
        if self._tail:
            out, self._tail = self._tail + out, b""
        if not out.endswith((b"\n\n", b"\n\r\n", b"\r\r")):  # an event continues in the next chunk
            ends = [i + len(sep) for sep in (b"\n\n", b"\n\r\n", b"\r\r") if (i := out.rfind(sep)) >= 0]
            cut = max(ends, default=0)
            if len(out) - cut < 1 << 20:  # a runaway event is not worth its memory
                self._tail = out[cut:]
            out = out[:cut]
        if out.find(_USAGE) < 0:
            return
        p = SseParser()
        for ev in p.feed(out) + p.close():
            if ev.data is not None and ev.data.find(_USAGE) >= 0:
                self.body(ev.data)

    def body(self, data: bytes) -> None:
        """A JSON document (an event's data, or a whole JSON response body)."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        u = usage_of(self.api, obj)
        if u:
            self._counts.update(u)

    @property
    def counts(self) -> dict[str, int] | None:
        if not self._counts:
            return None
        c = dict(self._counts)
        if "total_tokens" not in c and ("input_tokens" in c or "output_tokens" in c):
            c["total_tokens"] = c.get("input_tokens", 0) + c.get("output_tokens", 0)
        return c
