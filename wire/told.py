"""What a stream tells the client: its token usage, how the turn ended, the response's id
and model, in one shape for every API (sans-IO).

The turn log records the counts the client received next to the upstream's own. Each
API spells them differently; :func:`usage_of` reads one event's (or one JSON body's)
usage into ``input_tokens`` (the whole input, cached part included), ``output_tokens``
(reasoning included), ``cached_tokens`` (read from the cache), ``total_tokens`` and, where
the API says them and they are not zero, ``reasoning_tokens`` and ``cache_write_tokens``:

* Responses: ``response.usage`` of the terminal event (``usage`` of a JSON body):
  ``input_tokens``, ``output_tokens``, ``total_tokens``, ``input_tokens_details.
  cached_tokens``, ``output_tokens_details.reasoning_tokens``.
* chat: ``usage``: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``,
  ``prompt_tokens_details.cached_tokens``, ``completion_tokens_details.reasoning_tokens``.
* messages: ``message.usage`` of ``message_start`` and ``usage`` of ``message_delta``
  (or of a JSON body): ``input_tokens`` is the uncached part, so input = ``input_tokens``
  + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``; cached = the reads,
  cache writes = the creations; total = input + output.
* Gemini: ``usageMetadata``: ``promptTokenCount`` (cached included),
  ``candidatesTokenCount`` (+ ``thoughtsTokenCount``, the reasoning), ``totalTokenCount``,
  ``cachedContentTokenCount``.

:class:`Told` follows a repaired stream (and, fed the gateway's bytes, what the gateway
said): see its docstring for what it parses and holds. Later usage reports win key by
key (messages: input from ``message_start``, output from ``message_delta``); the last
ending wins.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson

from .sse import SseParser

__all__ = ["Told", "finish_of", "names_of", "usage_of"]


def _n(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


_OPENAI = {
    "responses": ("input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"),
    "chat": ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"),
}
"""OpenAI's two spellings: input, output and their details' field names."""


def usage_of(api: str, obj: Any) -> dict[str, int] | None:
    """The usage counts one event or JSON body reports (only the keys it has), or None."""
    if not isinstance(obj, dict):
        return None
    out: dict[str, int | None]
    if api in _OPENAI:
        inp, outp, details, out_details = _OPENAI[api]
        u = obj.get("usage") if "usage" in obj or api == "chat" else _dict(obj.get("response")).get("usage")
        if not isinstance(u, dict):
            return None
        out = {"input_tokens": _n(u.get(inp)), "output_tokens": _n(u.get(outp)), "total_tokens": _n(u.get("total_tokens")),
               "cached_tokens": _n(_dict(u.get(details)).get("cached_tokens")),
               "reasoning_tokens": _n(_dict(u.get(out_details)).get("reasoning_tokens"))}  # fmt: skip
    elif api == "messages":
        u = obj.get("usage") if "usage" in obj else _dict(obj.get("message")).get("usage")
        if not isinstance(u, dict):
            return None
        parts = [_n(u.get(k)) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
        out = {"input_tokens": sum(p for p in parts if p) if parts[0] is not None else None,
               "output_tokens": _n(u.get("output_tokens")), "cached_tokens": parts[1],
               "cache_write_tokens": parts[2]}  # fmt: skip
    elif api == "gemini":
        u = obj.get("usageMetadata")
        if not isinstance(u, dict):
            return None
        cand, thoughts = _n(u.get("candidatesTokenCount")), _n(u.get("thoughtsTokenCount"))
        out = {"input_tokens": _n(u.get("promptTokenCount")),
               "output_tokens": None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0),
               "total_tokens": _n(u.get("totalTokenCount")), "cached_tokens": _n(u.get("cachedContentTokenCount")),
               "reasoning_tokens": thoughts}  # fmt: skip
    else:
        return None
    found = {k: v for k, v in out.items() if v is not None and (v or k not in _DETAILS)}
    return found or None


_DETAILS = ("reasoning_tokens", "cache_write_tokens")
"""Counts kept only when not zero (most turns have neither)."""


_USAGE = b'"usage'
"""What marks an event that may carry usage (see the module docstring)."""

HOLD_CHUNKS = 3
"""Chunks without usage the reader keeps (the last ones) to read the ending from when it is
asked: a turn's ending is in its last events (chat's finish chunk before its usage chunk
and ``[DONE]``, an error event, Messages' ``message_delta``...)."""
HOLD_BYTES = 16 << 10
"""Of a held chunk, its last this many bytes (an ending's event is small; a Responses
terminal, which holds the whole output, carries usage and is read as it passes)."""


def finish_of(api: str, obj: Any) -> list[str] | None:
    """How one event or JSON body says the turn ended, in ``api``'s own words, one per
    choice or candidate: chat ``finish_reason``, Messages ``stop_reason``, Gemini
    ``finishReason``, Responses the terminal's status (``completed``, the
    ``incomplete_details.reason`` of an incomplete response, else ``incomplete``);
    ``error`` for an error object or event, or a failed response. None: it says nothing."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("error"), dict) and api != "responses":
        return ["error"]
    if api == "chat":
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return None
        found = [c.get("finish_reason") for c in choices if isinstance(c, dict)]
        words = [f for f in found if isinstance(f, str) and f]
        return words or None
    if api == "messages":
        typ = obj.get("type")
        if typ == "error":
            return ["error"]
        src = _dict(obj.get("delta")) if typ == "message_delta" else obj
        stop = src.get("stop_reason")
        return [stop] if isinstance(stop, str) and stop else None
    if api == "gemini":
        cands = obj.get("candidates")
        if not isinstance(cands, list):
            return None
        words = [c["finishReason"] for c in cands if isinstance(c, dict) and isinstance(c.get("finishReason"), str)]
        return words or None
    if api == "responses":
        typ = obj.get("type")
        if typ == "error" or typ == "response.failed":
            return ["error"]
        resp = _dict(obj.get("response")) if isinstance(typ, str) else obj  # an event, or a JSON body
        status = resp.get("status")
        if typ not in (None, "response.completed", "response.incomplete") or status in (None, "in_progress", "queued"):
            return None
        if status == "incomplete":
            reason = _dict(resp.get("incomplete_details")).get("reason")
            return [reason if isinstance(reason, str) and reason else "incomplete"]
        return ["error"] if status in ("failed", "cancelled") else [status] if isinstance(status, str) else None
    return None


def names_of(api: str, obj: Any) -> tuple[str | None, str | None]:
    """The response id and model one event or JSON body names (chat chunks and bodies;
    Responses ``response.*`` events and bodies; Messages ``message_start`` and bodies;
    Gemini ``responseId``, ``modelVersion``)."""
    if not isinstance(obj, dict):
        return None, None
    if api == "gemini":
        src, id_key, model_key = obj, "responseId", "modelVersion"
    else:
        src, id_key, model_key = obj, "id", "model"
        if api == "responses" and isinstance(obj.get("response"), dict):
            src = obj["response"]
        elif api == "messages" and isinstance(obj.get("message"), dict):
            src = obj["message"]
    rid, model = src.get(id_key), src.get(model_key)
    return (rid if isinstance(rid, str) and rid else None, model if isinstance(model, str) and model else None)


class Told:
    """Follows the bytes a client receives (or, fed the gateway's bytes, what the gateway
    said) and keeps what they report: the usage (:attr:`counts`, None until some was seen;
    see the module docstring), how the turn ended (:attr:`finish`, :func:`finish_of`; the
    last event that says so wins) and the response's id and model (:attr:`response_id`,
    :attr:`response_model`, from the first event).

    Per chunk it costs what the usage alone did: one ``bytes.find`` of ``"usage``. A chunk
    that has it (and the first) is parsed as it passes; the last :data:`HOLD_CHUNKS` others
    are kept (their last :data:`HOLD_BYTES`) and parsed for an ending only when
    :attr:`finish` is asked, once the turn is over. Looking for every API's stop words in
    every chunk cost five times as much (docs/benchmarks.md, "What the client was told")."""

    __slots__ = ("_counts", "_finish", "_first", "_held", "_tail", "api", "response_id", "response_model")

    def __init__(self, api: str) -> None:
        self.api = api
        self._counts: dict[str, int] = {}
        self._tail = b""
        """The unfinished last event of a chunk (rare: repaired output is whole events,
        except after a repairer failed open)."""
        self._first = True
        """No event was read yet: the first one is, whatever it carries (its names)."""
        self._finish: list[str] | None = None
        self._held: deque[bytes] = deque(maxlen=HOLD_CHUNKS)
        """The last chunks without usage since the last ending read as it passed."""
        self.response_id: str | None = None
        self.response_model: str | None = None

    @classmethod
    def whole(cls, api: str, body: bytes, json: bool) -> Told:
        """What a whole buffered body tells: a JSON body (``json``) or an SSE body."""
        r = cls(api)
        if json:
            r.body(body)
        else:
            r.feed(body + b"\n\n")
        return r

    def feed(self, out: bytes) -> None:
        """SSE bytes, in any chunks."""
        if self._tail:
            out, self._tail = self._tail + out, b""
        if not out.endswith((b"\n\n", b"\n\r\n", b"\r\r")):  # an event continues in the next chunk
            ends = [i + len(sep) for sep in (b"\n\n", b"\n\r\n", b"\r\r") if (i := out.rfind(sep)) >= 0]
            cut = max(ends, default=0)
            if len(out) - cut < 1 << 20:  # a runaway event is not worth its memory
                self._tail = out[cut:]
            out = out[:cut]
        if not out:
            return
        if self._first or out.find(_USAGE) >= 0:
            for data in _datas(out):
                self.body(data)
        else:
            self._held.append(out if len(out) <= HOLD_BYTES else out[-HOLD_BYTES:])

    def body(self, data: bytes) -> None:
        """A JSON document (an event's data, a WebSocket message, or a whole JSON body)."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        self.read(obj)

    def read(self, obj: Any) -> None:
        """A parsed JSON document (a body the caller parsed already): read, never changed."""
        if self._first:
            self._first = False
            self.response_id, self.response_model = names_of(self.api, obj)
        u = usage_of(self.api, obj)
        if u:
            self._counts.update(u)
        f = finish_of(self.api, obj)
        if f is not None:
            self._finish = f
            self._held.clear()  # what came before says less than this

    @property
    def finish(self) -> list[str] | None:
        """How the turn ended, as far as the bytes fed so far say (read when the turn is over)."""
        while self._held:
            for data in _datas(self._held.popleft()):
                try:
                    f = finish_of(self.api, orjson.loads(data))
                except orjson.JSONDecodeError:  # bad JSON, or the cut start of a held tail
                    continue
                if f is not None:
                    self._finish = f
        return self._finish

    @property
    def counts(self) -> dict[str, int] | None:
        if not self._counts:
            return None
        c = dict(self._counts)
        if "total_tokens" not in c and ("input_tokens" in c or "output_tokens" in c):
            c["total_tokens"] = c.get("input_tokens", 0) + c.get("output_tokens", 0)
        return c


def _datas(chunk: bytes) -> list[bytes]:
    """The data of each event in ``chunk`` (whole events)."""
    p = SseParser()
    return [ev.data for ev in p.feed(chunk) + p.close() if ev.data is not None]
