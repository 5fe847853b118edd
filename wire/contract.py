"""The stream contract: what a correct stream of each API is, as named rules, checked live.

Written from the specs and the real clients' schemas (the AI SDK's, openai-python's and
Codex's parsers; OpenAI's Responses and chat streaming references; Anthropic's Messages
streaming; Gemini's ``streamGenerateContent``), not from any gateway's habits.
One definition serves the tests (an oracle for the repairers), check mode in the addon
(``streamfix_mode=check``) and the offline checker (``python -m streamfix.check``).

:class:`StreamChecker` is sans-IO and incremental: ``feed(bytes)`` per chunk (any chunk
boundaries), ``close()`` at the end; it never changes or keeps the bytes. Memory per
stream: the SSE parser's current event, the ids of the announced items, and the text
streamed into the one open content part (for :data:`text.replay`). Each violation is a
:class:`Violation` ``(rule, event, reason)``: the rule's name (a key of :data:`RULES`),
the SSE event's number (0 = the first event with a field other than a comment; ``None``
for the end of the stream) and a short reason that names fields, types, ids and indexes,
never content (no text, no arguments). At most :data:`MAX_VIOLATIONS` are kept per
stream; :attr:`StreamChecker.dropped` counts the rest.

Prefix mode (``prefix=True``): the bytes are what a client got of a stream that was cut
(the upstream reset or closed mid-body). Every rule a prefix can satisfy is checked;
those only a whole stream can (:data:`END_RULES`: a terminal at the end) are not, and an
unfinished last event is not judged (no client parses half an event).

:func:`check` runs it over a whole body.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

import orjson

from . import stops, usage_math
from .foreign import foreign, vendor
from .hidden import ZEROED_COMPLETION, start_input, synthetic_completion, synthetic_delta, zeroed_completion
from .replay import HOLD, PHRASE, REPEATED, START, WHOLE, pure_content, step
from .sse import Event, SseParser, cr_cut, glued_at
from .toolcalls import forced_call, whole_calls
from .verdict import Decision, Verdict

__all__ = [
    "END_RULES",
    "MAX_VIOLATIONS",
    "RULES",
    "StreamChecker",
    "Violation",
    "check",
    "check_json",
    "guess_api",
    "guess_json_api",
    "repeat",
]

MAX_VIOLATIONS = 200

RULES: dict[str, str] = {
    # SSE framing, every API
    "sse.empty_data": "an event whose data is empty (openai-python's json.loads fails on it)",
    "sse.not_json": "event data that is not a JSON object (only [DONE] is allowed besides JSON)",
    "sse.nonstandard": "an event type the API does not define (ping, keepalive, ...): strict clients reject it",
    "sse.unterminated": "the stream ends inside an event (no blank line after it)",
    "sse.cr_end": "a CR-only stream does not end right after its last event's blank line (eventsource-parser, "
    "under every AI SDK, holds that CR back as a possible CRLF and drops the event)",
    "sse.glued": "an event's lines run into the next one's (no blank line between): its data is not JSON and an "
    "event: line follows a data: line (LiteLLM's ping or error after a cut provider line)",
    "sse.vendor": "a vendor's own event on /v1/responses (codex.rate_limits, codex.response.metadata, responsesapi.*): "
    "only its own client (Codex) reads it; a strict client of the API rejects it",
    # every API
    "terminal.hidden_failure": "no success end for a turn that did not finish: Responses response.completed without "
    "usage from CPA's Gemini-family translator (its synthetic STOP), chat [DONE] with no finish_reason, messages "
    "message_delta end_turn with usage 0/0 after a message_start that counted the input (CPA's Antigravity end), "
    "a chat.completion body with id, model and usage zeroed and no content (HTTP 200 for no answer)",
    "stop.reason": "a stop reason of the API's own vocabulary (chat finish_reason, messages stop_reason, Gemini "
    "finishReason, Responses incomplete_details.reason), and a chat finish_reason its native_finish_reason agrees with",
    "usage.sums": "usage adds up: output counts the reasoning tokens its total counts, input the cached ones, no count "
    "is negative",
    "terminal.truncated": "no normal end for a turn the evidence says was cut (the request's output cap reached, the "
    "last tool call's arguments not JSON): the API's truncation (response.incomplete, length, max_tokens, MAX_TOKENS)",
    # /v1/responses
    "response.sequence": "sequence_number strictly increasing over the stream",
    "response.id": "response.id the same on every lifecycle and terminal event",
    "response.fields": "response.created/in_progress carry response.id, created_at (number) and model",
    "item.announced": "every item event follows its item's output_item.added",
    "item.id": "an item's events carry the item_id it was announced with",
    "item.order": "one item open at a time; its events come while it is open; done closes it",
    "item.output_index": "output_index dense: the item's position in the output (0, 1, 2 ...)",
    "item.fields": "an added/done item carries what clients require (id; a call's call_id, name, arguments)",
    "part.announced": "text events for a content part follow its content_part.added",
    "text.replay": "no delta, and no run of deltas, repeats the whole text already streamed into its part",
    "function_call.status": "function_call items: status in_progress on added, completed/incomplete on done and in output",
    "reasoning.summary": "a reasoning item carries a summary list (added, done, and in the terminal's output)",
    "reasoning.fields": "reasoning summary events carry item_id and summary_index",
    "terminal.present": "the stream ends with a terminal event (a success, or a failure)",
    "terminal.last": "nothing but comments or [DONE] after the terminal event",
    "terminal.items_closed": "every item is closed before a success terminal",
    "terminal.output": "a success terminal has an output list, of the announced items, in order "
    "(a failure's too, when it lists any)",
    "terminal.usage": "a success terminal's usage has integer input/output/total tokens",
    "terminal.incomplete_reason": "response.incomplete names incomplete_details.reason",
    "failure.sequence": "response.failed/error carry a sequence_number when the stream numbers its events",
    # /v1/chat/completions
    "chat.tool_index": "tool_calls[].index is 0..n-1 per choice, in order of first appearance, one call per index "
    "(a new call id at an index in use is a second call there)",
    "chat.tool_name": "a tool call's first delta carries function.name",
    "chat.tool_header": "a tool call's name is announced once (a re-sent header doubles it in clients)",
    "chat.finish_once": "each choice gets one finish_reason",
    "chat.usage_chunk": "the usage chunk after the finish (stream_options.include_usage) has choices: []",
    "chat.error_finish": "a failure is an error chunk, not a finish_reason that names an error ('error', "
    "'overloaded_error'...)",
    "chat.done": "a stream that finished without an error ends with data: [DONE]",
    "chat.tool_finish": "a choice whose last output was whole tool calls (arguments JSON objects) does not "
    "finish 'stop'",
    "chat.error_last": "nothing but comments or [DONE] after an error chunk",
    # /v1/messages
    "messages.start": "message_start comes first",
    "messages.block_index": "content blocks are numbered 0, 1, 2 ... in order",
    "messages.block_order": "one content block open at a time; deltas and stop for the open one",
    "messages.stop_reason": "message_delta carries stop_reason after every block closed",
    "messages.stop": "message_stop follows message_delta",
    # Gemini
    "gemini.finish": "the stream's last candidate chunk carries finishReason, and no content comes after one",
}


END_RULES = frozenset({"terminal.present", "chat.done"})
"""Rules only a whole stream can satisfy (reported at its end): not checked in prefix mode."""


def repeat(text: str, run: int | None, deltas: int, delta: str) -> tuple[int | None, int]:
    """Rule text.replay, one non-empty delta of a text at a time, on its characters (the
    definition, and the repairers' use of it: :func:`wire.replay.step`).

    ``text``: every delta before this one; ``run``: the offset in ``text`` where a repeat
    started (the length of the text it repeats), or None; ``deltas``: how many deltas
    ``text`` has. Returns the new ``run`` and the length of the text this delta completes
    a repeat of (0: none)."""
    if run is not None:
        what = step(text, run, len(text) - run, deltas, run, delta)
        if what == HOLD:
            return run, 0
        if what == REPEATED:
            return None, run
        if what == PHRASE:
            return None, 0
        # DIVERGED: not a repeat; this delta may start one
    what = step(text, len(text), -1, deltas, len(text), delta)
    if what == WHOLE:
        return None, len(text)
    if what == START:
        return len(text), 0
    return None, 0


class Violation(NamedTuple):
    rule: str
    event: int | None
    reason: str

    def __str__(self) -> str:
        where = "end of stream" if self.event is None else f"event {self.event}"
        return f"{where}: {self.rule}: {self.reason}"


def _k(v: Any) -> Any:
    """``v`` as a dict key or set member: itself when hashable JSON, else its repr (a
    gateway's id or index can be any JSON value; the checker must not fail on it)."""
    return v if v is None or isinstance(v, (str, int, float)) else repr(v)


def _is_int(v: Any) -> TypeGuard[int]:
    return type(v) is int


def _obj(v: Any) -> dict[str, Any]:
    """``v`` if it is a JSON object, else an empty one."""
    return v if isinstance(v, dict) else {}


def _seq(v: Any) -> list[Any]:
    """``v`` if it is a JSON array, else an empty one."""
    return v if isinstance(v, list) else []


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Evidence:
    """What a stream tells of how it ended, for rule ``terminal.truncated``: the evidence
    the repairers give the verdict (wire/verdict.py), read the same way (the text the
    client sees, each tool call's arguments in call order, the output tokens, the
    gateway's own stop) with the request's output cap when the checker has the request.
    Keeps the arguments of the latest call only (the verdict reads the last one)."""

    __slots__ = ("args", "forced", "key", "verdict")

    def __init__(self, request: Any) -> None:
        self.verdict = Verdict()
        self.verdict.request(request)
        self.forced = forced_call(request)  # rule chat.tool_finish: a named function finishes stop
        self.key: Any = None
        self.args: list[str] = []

    def text(self, delta: Any) -> None:
        if isinstance(delta, str) and delta:
            self.verdict.observe_text(delta)

    def arg(self, key: Any, delta: Any) -> None:
        if not isinstance(delta, str) or not delta:
            return
        if key != self.key:
            self.key, self.args = key, []
        self.args.append(delta)
        self.verdict.observe_args(delta)
        self.verdict.tool_args("".join(self.args))

    def whole_args(self, key: Any, args: Any) -> None:
        """A call's arguments as its done event lists them."""
        if isinstance(args, str):
            self.key, self.args = key, [args]
            self.verdict.tool_args(args)

    def cut(self) -> Decision | None:
        """The verdict, when it says the turn was cut and nothing of the gateway's said so."""
        d = self.verdict.decide()
        return d if d.truncated and not d.native else None


class _Api:
    """One API's contract: fed JSON objects in order, reports through ``bad``."""

    api = ""

    def __init__(self, bad) -> None:
        self.bad = bad  # (rule, event number | None, reason) -> None
        self.ev = _Evidence(None)  # the checker sets it with the request

    def standard_name(self, name: str, obj: dict[str, Any] | None) -> bool:
        """Whether an ``event:`` name is one this API sends."""
        return obj is not None and name == obj.get("type")

    def event(self, n: int, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def done_sentinel(self, n: int) -> None:
        """``data: [DONE]``."""

    def end(self) -> None:
        raise NotImplementedError


# --- /v1/responses ----------------------------------------------------------------------

_TERMINALS = frozenset({"response.completed", "response.incomplete"})
_FAILURES = frozenset({"response.failed", "error"})
_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
_TEXT = frozenset({"response.output_text.delta", "response.output_text.done"})
_SUMMARY = frozenset(
    {
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
    }
)


class _Open:
    __slots__ = ("chunks", "ci", "id", "parts", "pos", "run", "text", "type")

    def __init__(self, pos: int, iid: Any, typ: Any) -> None:
        self.pos = pos
        self.id = iid
        self.type = typ
        self.parts: set[Any] = set()
        self.text = ""  # text streamed into the current part (text.replay)
        self.chunks = 0
        self.ci: Any = None
        self.run: int | None = None  # where a possible repeat of the text began (text.replay)


class _Responses(_Api):
    api = "responses"

    def __init__(self, bad, vendor_ok: bool = False) -> None:
        super().__init__(bad)
        self.vendor_ok = vendor_ok  # the client is the vendor's own (Codex): its events are its
        self.last_seq: int | None = None
        self.numbered = False
        self.resp_id: str | None = None
        self.ids: list[Any] = []  # announced item ids, in order
        self.content_ids: list[Any] = []  # those of message and reasoning items
        self.pos_by_id: dict[Any, int] = {}
        self.pos_by_raw: dict[Any, int] = {}
        self.open: _Open | None = None
        self.terminal: int | None = None
        self.unknown: set[Any] = set()

    def standard_name(self, name: str, obj: dict[str, Any] | None) -> bool:
        return obj is not None and name == obj.get("type")

    def event(self, n: int, obj: dict[str, Any]) -> None:
        bad = self.bad
        t = obj.get("type")
        if vendor(t):  # codex.* (rate limits...): the ChatGPT backend's own, which Codex reads
            if not self.vendor_ok:
                bad("sse.vendor", n, f"type {t!r} is the Codex backend's own (kept for Codex only)")
            return
        if not isinstance(t, str) or not (t.startswith("response.") or t == "error"):
            bad("sse.nonstandard", n, f"type {t!r} is not a Responses stream event")
            return
        if self.terminal is not None:
            bad("terminal.last", n, f"{t} after the terminal event {self.terminal}")
        op = self.open
        if (
            op is not None
            and op.run is not None
            and not (
                t == "response.output_text.delta"
                and self._find(obj, obj.get("item_id")) == op.pos
                and _k(obj.get("content_index")) == op.ci
            )
        ):
            op.run = None  # any other event ends a possible repeat (text.replay)
        seq = obj.get("sequence_number")
        if _is_int(seq):
            self.numbered = True
            if self.last_seq is not None and seq <= self.last_seq:
                bad("response.sequence", n, f"sequence_number {seq} not above {self.last_seq}")
            self.last_seq = seq if self.last_seq is None else max(seq, self.last_seq)
        resp = obj.get("response")
        if isinstance(resp, dict):
            rid = resp.get("id")
            if self.resp_id is None and isinstance(rid, str):
                self.resp_id = rid
            elif self.resp_id is not None and rid != self.resp_id:
                bad("response.id", n, f"{t}: response.id {rid!r}, the stream's is {self.resp_id!r}")
        if t in _LIFECYCLE and t != "response.queued":
            r = resp if isinstance(resp, dict) else {}
            missing = [k for k in ("id", "model") if not isinstance(r.get(k), str)]
            if not _is_num(r.get("created_at")):
                missing.insert(1, "created_at")
            if missing:
                bad("response.fields", n, f"{t} without response.{', response.'.join(missing)}")
        elif t == "response.output_item.added":
            self._added(n, obj)
        elif t == "response.output_item.done":
            self._done(n, obj)
        elif t in _TERMINALS:
            self._terminal(n, t, resp)
        elif t in _FAILURES:
            self.terminal = n
            if self.numbered and not _is_int(seq):
                bad("failure.sequence", n, f"{t} without sequence_number")
            output = resp.get("output") if isinstance(resp, dict) else None
            if isinstance(output, list) and output:
                out_ids = [o.get("id") if isinstance(o, dict) else None for o in output]
                if out_ids != self.ids:
                    bad("terminal.output", n, f"{t} output ids {out_ids}, announced {self.ids}")
        elif "item_id" in obj or "output_index" in obj:
            self._item_event(n, t, obj)

    def _added(self, n: int, obj: dict[str, Any]) -> None:
        bad = self.bad
        item = _obj(obj.get("item"))
        idx, iid, typ = obj.get("output_index"), item.get("id"), item.get("type")
        if self.open is not None:
            bad("item.order", n, f"item {self.open.pos} still open when item {len(self.ids)} is added")
        if idx != len(self.ids):
            bad("item.output_index", n, f"output_index {idx!r}, expected {len(self.ids)}")
        self._fields(n, "output_item.added", item)
        if typ == "function_call" and item.get("status") != "in_progress":
            bad("function_call.status", n, f"function_call added with status {item.get('status')!r}")
        if typ == "reasoning" and not isinstance(item.get("summary"), list):
            bad("reasoning.summary", n, "reasoning item added without a summary list")
        pos = len(self.ids)
        self.ids.append(iid)
        if typ in ("message", "reasoning"):
            self.content_ids.append(iid)
        if iid is not None:
            self.pos_by_id[_k(iid)] = pos
        self.pos_by_raw[_k(idx)] = pos
        self.open = _Open(pos, iid, typ)

    def _fields(self, n: int, what: str, item: dict[str, Any]) -> None:
        need = ["id"]
        if item.get("type") == "function_call":
            need += ["call_id", "name", "arguments"]
        missing = [k for k in need if not isinstance(item.get(k), str)]
        if missing:
            self.bad("item.fields", n, f"{what} {item.get('type')} without {', '.join(missing)}")

    def _find(self, obj: dict[str, Any], iid: Any) -> int | None:
        pos = self.pos_by_id.get(_k(iid)) if iid is not None else None
        if pos is None:
            pos = self.pos_by_raw.get(_k(obj.get("output_index")))
        return pos

    def _done(self, n: int, obj: dict[str, Any]) -> None:
        bad = self.bad
        item = _obj(obj.get("item"))
        iid = item.get("id")
        pos = self._find(obj, iid)
        if pos is None:
            bad("item.announced", n, f"output_item.done for item {iid!r}, never added")
            return
        if iid != self.ids[pos]:
            bad("item.id", n, f"output_item.done item.id {iid!r}, announced as {self.ids[pos]!r}")
        if self.open is None or self.open.pos != pos:
            where = "is closed" if self.open is None else f"is not the open item {self.open.pos}"
            bad("item.order", n, f"output_item.done for item {pos}, which {where}")
        if obj.get("output_index") != pos:
            bad(
                "item.output_index",
                n,
                f"output_item.done output_index {obj.get('output_index')!r}, the item's is {pos}",
            )
        self._fields(n, "output_item.done", item)
        if item.get("type") == "function_call" and item.get("status") not in ("completed", "incomplete"):
            bad("function_call.status", n, f"function_call done with status {item.get('status')!r}")
        if item.get("type") == "function_call":
            self.ev.whole_args(pos, item.get("arguments"))
        if item.get("type") == "reasoning" and not isinstance(item.get("summary"), list):
            bad("reasoning.summary", n, "reasoning item done without a summary list")
        if self.open is not None and self.open.pos == pos:
            self.open = None

    def _item_event(self, n: int, t: str, obj: dict[str, Any]) -> None:
        bad = self.bad
        iid = obj.get("item_id")
        pos = self._find(obj, iid)
        if pos is None:
            key = _k(iid) if iid is not None else ("index", _k(obj.get("output_index")))
            if key not in self.unknown:
                self.unknown.add(key)
                bad("item.announced", n, f"{t} for item {iid!r} (output_index {obj.get('output_index')!r}) never added")
            return
        if iid is not None and iid != self.ids[pos]:
            bad("item.id", n, f"{t} item_id {iid!r}, announced as {self.ids[pos]!r}")
        op = self.open
        if op is None or op.pos != pos:
            state = "closed" if op is None else f"open is item {op.pos}"
            bad("item.order", n, f"{t} for item {pos} ({state})")
            return
        if "output_index" in obj and obj["output_index"] != pos:
            bad("item.output_index", n, f"{t} output_index {obj['output_index']!r}, the item's is {pos}")
        if t in _SUMMARY:
            missing = [k for k in ("item_id", "summary_index") if k not in obj]
            if missing:
                bad("reasoning.fields", n, f"{t} without {', '.join(missing)}")
        ci = _k(obj.get("content_index"))
        if t == "response.content_part.added":
            op.parts.add(ci)
            op.ci, op.text, op.chunks, op.run = ci, "", 0, None
        elif t in _TEXT or t == "response.content_part.done":
            if ci not in op.parts:
                op.parts.add(ci)  # reported once per part
                bad("part.announced", n, f"{t} for content part {ci!r} never added")
            if t == "response.output_text.delta":
                self._replay(n, op, ci, obj.get("delta"))
                self.ev.text(obj.get("delta"))
        if t == "response.function_call_arguments.delta":
            self.ev.arg(pos, obj.get("delta"))

    def _replay(self, n: int, op: _Open, ci: Any, delta: Any) -> None:
        if not isinstance(delta, str):
            return
        if op.ci != ci:
            op.ci, op.text, op.chunks, op.run = ci, "", 0, None
        if delta:
            op.run, whole = repeat(op.text, op.run, op.chunks, delta)
            if whole:
                how = "output_text.delta repeats" if whole == len(delta) else "a run of deltas ends repeating"
                self.bad("text.replay", n, f"{how} the whole text of item {op.pos} part {ci!r} ({whole} chars)")
        op.text += delta
        op.chunks += 1

    def _terminal(self, n: int, t: str, resp: Any) -> None:
        bad = self.bad
        self.terminal = n
        if self.open is not None:
            bad("terminal.items_closed", n, f"item {self.open.pos} still open at {t}")
            self.open = None
        r = resp if isinstance(resp, dict) else {}
        if t == "response.completed" and synthetic_completion(r, self.content_ids):
            bad("terminal.hidden_failure", n, "response.completed without usage, from the Gemini translator's ids: "
                "the gateway's synthetic STOP for a body that never finished")  # fmt: skip
        output = _seq(r.get("output"))
        out_ids = [o.get("id") if isinstance(o, dict) else None for o in output]
        if not isinstance(r.get("output"), list):
            bad("terminal.output", n, f"{t} without an output list")
        elif out_ids != self.ids:
            bad("terminal.output", n, f"{t} output ids {out_ids}, announced {self.ids}")
        for o in output:
            if (
                isinstance(o, dict)
                and o.get("type") == "function_call"
                and o.get("status") not in ("completed", "incomplete")
            ):
                bad(
                    "function_call.status",
                    n,
                    f"function_call {o.get('id')!r} in output with status {o.get('status')!r}",
                )
            if isinstance(o, dict) and o.get("type") == "reasoning" and not isinstance(o.get("summary"), list):
                bad("reasoning.summary", n, f"reasoning {o.get('id')!r} in output without a summary list")
        u = r.get("usage")
        if not isinstance(u, dict) or not all(
            _is_int(u.get(k)) for k in ("input_tokens", "output_tokens", "total_tokens")
        ):
            shape = "missing" if u is None else "without integer input/output/total tokens"
            bad("terminal.usage", n, f"{t} usage {shape}")
        for why in usage_math.problems("responses", u):
            bad("usage.sums", n, why)
        if isinstance(u, dict):
            self.ev.verdict.usage(u.get("output_tokens"))
        if t == "response.incomplete":
            self.ev.verdict.native("max_tokens", "response.incomplete")
        elif (d := self.ev.cut()) is not None:
            bad("terminal.truncated", n, f"response.completed, but {d.receipt()}")
        reason = (
            (r.get("incomplete_details") or {}).get("reason") if isinstance(r.get("incomplete_details"), dict) else None
        )
        if t == "response.incomplete" and not reason:
            bad("terminal.incomplete_reason", n, "response.incomplete without incomplete_details.reason")
        elif t == "response.incomplete" and reason not in stops.OWN["responses"]:
            bad("stop.reason", n, f"incomplete_details.reason {reason!r} is not a Responses reason")

    def end(self) -> None:
        if self.terminal is None:
            self.bad("terminal.present", None, "no response.completed/incomplete/failed or error before the end")


# --- /v1/chat/completions ---------------------------------------------------------------


class _Chat(_Api):
    api = "chat"

    def __init__(self, bad) -> None:
        super().__init__(bad)
        self.order: dict[Any, list[Any]] = {}  # choice -> tool call indexes by first appearance
        self.named: set[tuple[Any, Any]] = set()
        self.finished: set[Any] = set()
        self.ended = False
        self.text: dict[Any, tuple[str, int]] = {}  # choice -> (content so far, deltas)
        self.run: tuple[Any, int] | None = None  # (choice, offset): a possible repeat (text.replay)
        self.call_ids: dict[tuple[Any, Any], Any] = {}  # (choice, index) -> the call id there
        self.chunks = False  # a chunk with choices came
        self.error = False
        self.normal_finish: Any = None  # a stop/tool_calls finish (terminal.truncated)
        self.tail: dict[Any, bool] = {}  # choice -> its last output was a tool call (chat.tool_finish)
        self.args: dict[Any, dict[Any, str]] = {}  # choice -> (index, id) -> its arguments so far

    def standard_name(self, name: str, obj: dict[str, Any] | None) -> bool:
        return False  # OpenAI's chat stream has no event: lines

    def done_sentinel(self, n: int) -> None:
        if self.chunks and not self.finished and not self.error and not self.ended:
            self.bad("terminal.hidden_failure", n, "data: [DONE] after chunks with no finish_reason and no error")
        if not self.ended:
            self._truncated(n)
        self.ended = True
        self.run = None

    def _truncated(self, n: int | None) -> None:
        """Rule terminal.truncated, once the finish and its usage came (at [DONE] or the end)."""
        if self.finished and not self.error and self.normal_finish and (d := self.ev.cut()) is not None:
            self.bad("terminal.truncated", n, f"finish_reason {self.normal_finish!r}, but {d.receipt()}")

    def event(self, n: int, obj: dict[str, Any]) -> None:
        bad = self.bad
        pure = pure_content(obj)
        if self.run is not None and (pure is None or _k(pure[0]) != self.run[0]):
            self.run = None  # any other chunk ends a possible repeat (text.replay)
        if self.error:
            bad("chat.error_last", n, "a data chunk after the error chunk")
            return
        if "error" in obj:
            self.ended = self.error = True
            return
        choices = obj.get("choices")
        if not isinstance(choices, list):
            bad("sse.nonstandard", n, f"chunk without choices (type {obj.get('type')!r})")
            return
        self.chunks = True
        for why in usage_math.problems("chat", obj.get("usage")):
            bad("usage.sums", n, why)
        if isinstance(obj.get("usage"), dict):
            self.ev.verdict.usage(obj["usage"].get("completion_tokens"))
        if choices and self.finished and isinstance(obj.get("usage"), dict):
            after = [ch for ch in choices if isinstance(ch, dict) and _k(ch.get("index", 0)) in self.finished]
            if len(after) == len(choices):
                bad("chat.usage_chunk", n, f"usage chunk after the finish with {len(choices)} choice(s), not []")
        for ch in choices:
            if not isinstance(ch, dict):
                continue
            ci = _k(ch.get("index", 0))
            delta = _obj(ch.get("delta"))
            if ci in self.finished and (delta.get("content") or delta.get("tool_calls")):
                bad("chat.finish_once", n, f"choice {ci} gets content after its finish_reason")
            content = delta.get("content")
            self.ev.text(content)
            if isinstance(content, str) and content:
                self.tail[ci] = False
                text, k = self.text.get(ci, ("", 0))
                if pure is None:  # only a pure chunk starts or continues a run; any may be a whole replay
                    whole = len(text) if k >= 2 and content == text else 0
                else:
                    run, whole = repeat(text, self.run[1] if self.run is not None else None, k, content)
                    self.run = (ci, run) if run is not None else None
                if whole:
                    how = "delta repeats" if whole == len(content) else "run of deltas ends repeating"
                    bad("text.replay", n, f"choice {ci} {how} the whole content so far ({whole} chars)")
                self.text[ci] = (text + content, k + 1)
            for tc in delta.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                i = _k(tc.get("index"))
                order = self.order.setdefault(ci, [])
                fn = _obj(tc.get("function"))
                name = fn.get("name")
                tid = tc.get("id")
                if isinstance(tid, str) and tid.strip():
                    known = self.call_ids.setdefault((ci, i), tid)
                    if known != tid and i in order:
                        bad("chat.tool_index", n, f"choice {ci}: a second call (a new id) at tool_calls index {i!r}")
                        self.call_ids[(ci, i)] = tid
                        self.ev.arg((ci, i, tid), fn.get("arguments"))
                        continue
                self.ev.arg((ci, i, self.call_ids.get((ci, i))), fn.get("arguments"))
                self.tail[ci] = True
                key = (i, self.call_ids.get((ci, i)))
                calls = self.args.setdefault(ci, {})
                calls[key] = calls.get(key, "") + (fn["arguments"] if isinstance(fn.get("arguments"), str) else "")
                if i not in order:
                    if i != len(order):
                        bad("chat.tool_index", n, f"choice {ci}: tool_calls index {i!r}, expected {len(order)}")
                    order.append(i)
                    if not name:
                        bad("chat.tool_name", n, f"choice {ci}: first delta of tool call {i!r} has no function.name")
                if name:
                    if (ci, i) in self.named:
                        bad("chat.tool_header", n, f"choice {ci}: tool call {i!r} announces its name again")
                    self.named.add((ci, i))
            if ch.get("finish_reason") is not None:
                if ci in self.finished:
                    bad("chat.finish_once", n, f"choice {ci}: second finish_reason")
                self.finished.add(ci)
                self.text.pop(ci, None)
                fr, native = ch.get("finish_reason"), ch.get("native_finish_reason")
                if fr in ("length", "content_filter"):
                    self.ev.verdict.native("max_tokens", f"finish_reason {fr!r}")
                elif fr in ("stop", "tool_calls"):
                    self.normal_finish = fr
                if fr not in stops.OWN["chat"]:
                    bad("stop.reason", n, f"choice {ci}: finish_reason {fr!r} is not a chat finish reason")
                    if stops.names_error(fr):
                        bad("chat.error_finish", n, f"choice {ci}: finish_reason {fr!r} names an error")
                if (
                    fr == "stop"
                    and self.tail.get(ci)
                    and not self.ev.forced
                    and whole_calls(self.args.get(ci, {}).values())
                ):
                    bad("chat.tool_finish", n, f"choice {ci}: finish_reason 'stop' right after whole tool calls")
                elif stops.native_disagrees(fr, native) is not None:
                    bad(
                        "stop.reason",
                        n,
                        f"choice {ci}: finish_reason {fr!r} while native_finish_reason says {native!r}",
                    )

    def end(self) -> None:
        if not self.finished and not self.ended:
            self.bad("terminal.present", None, "no finish_reason, error or [DONE] before the end")
        elif self.finished and not self.ended and not self.error:
            self.bad("chat.done", None, "the stream finished but ended without data: [DONE]")
        if not self.ended:
            self._truncated(None)


# --- /v1/messages -----------------------------------------------------------------------

_MESSAGES_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)


class _Messages(_Api):
    api = "messages"

    def __init__(self, bad) -> None:
        super().__init__(bad)
        self.open: Any = None
        self.next = 0
        self.state = "start"
        self.counted_input = 0  # message_start's input_tokens (hidden.synthetic_delta)

    def event(self, n: int, obj: dict[str, Any]) -> None:
        bad = self.bad
        t = obj.get("type")
        if t not in _MESSAGES_TYPES:
            bad("sse.nonstandard", n, f"type {t!r} is not a Messages stream event")
            return
        if t == "error":
            self.state = "done"
            return
        if t == "ping":
            return
        if self.state == "done":
            bad("terminal.last", n, f"{t} after message_stop")
        if self.state == "start" and t != "message_start":
            bad("messages.start", n, f"{t} before message_start")
        if t == "message_start":
            self.state = "blocks"
            self.counted_input = start_input(obj)
        elif t == "content_block_start":
            if self.open is not None:
                bad("messages.block_order", n, f"block {self.open} still open when block {obj.get('index')!r} starts")
            if obj.get("index") != self.next:
                bad("messages.block_index", n, f"content_block_start index {obj.get('index')!r}, expected {self.next}")
            self.open, self.next = obj.get("index"), self.next + 1
        elif t in ("content_block_delta", "content_block_stop"):
            if obj.get("index") != self.open or self.open is None:
                bad("messages.block_order", n, f"{t} for block {obj.get('index')!r} while {self.open!r} is open")
            d = _obj(obj.get("delta"))
            if d.get("type") == "text_delta":
                self.ev.text(d.get("text"))
            elif d.get("type") == "input_json_delta":
                self.ev.arg(_k(obj.get("index")), d.get("partial_json"))
            if t == "content_block_stop":
                self.open = None
        elif t == "message_delta":
            if synthetic_delta(obj, self.counted_input):
                bad(
                    "terminal.hidden_failure",
                    n,
                    "message_delta end_turn with usage 0/0 after a message_start that "
                    "counted the input: CPA's Antigravity translator's end of a body without a finish",
                )
            if self.open is not None:
                bad("messages.stop_reason", n, f"message_delta while block {self.open} is open")
            sr = obj["delta"].get("stop_reason") if isinstance(obj.get("delta"), dict) else None
            if sr is None:
                bad("messages.stop_reason", n, "message_delta without stop_reason")
            elif sr not in stops.OWN["messages"]:
                bad("stop.reason", n, f"stop_reason {sr!r} is not a Messages stop reason")
            for why in usage_math.problems("messages", obj.get("usage")):
                bad("usage.sums", n, why)
            if isinstance(obj.get("usage"), dict):
                self.ev.verdict.usage(obj["usage"].get("output_tokens"))
            cut = self.ev.cut() if sr in ("end_turn", "tool_use", "stop_sequence") else None
            if cut is not None:
                bad("terminal.truncated", n, f"stop_reason {sr!r}, but {cut.receipt()}")
            self.state = "delta"
        elif t == "message_stop":
            if self.state != "delta":
                bad("messages.stop", n, "message_stop without message_delta")
            self.state = "done"

    def end(self) -> None:
        if self.state != "done":
            self.bad("terminal.present", None, "no message_stop or error before the end")


# --- Gemini -----------------------------------------------------------------------------


class _Gemini(_Api):
    api = "gemini"

    def __init__(self, bad) -> None:
        super().__init__(bad)
        self.finished = False
        self.last_unfinished: int | None = None
        self.error = False
        self.finish: Any = None

    def standard_name(self, name: str, obj: dict[str, Any] | None) -> bool:
        return False

    def event(self, n: int, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self.error = True
            return
        cands = obj.get("candidates")
        if cands is None and "usageMetadata" not in obj and "promptFeedback" not in obj:
            self.bad("sse.nonstandard", n, "chunk without candidates, usageMetadata or promptFeedback")
            return
        um = obj.get("usageMetadata")
        if isinstance(um, dict) and type(um.get("candidatesTokenCount")) is int:
            thoughts = um.get("thoughtsTokenCount")
            self.ev.verdict.usage(um["candidatesTokenCount"] + (thoughts if type(thoughts) is int else 0))
        for c in cands or []:
            content = c.get("content") if isinstance(c, dict) else None
            for p in _seq(content.get("parts")) if isinstance(content, dict) else []:
                if isinstance(p, dict) and not p.get("thought"):
                    self.ev.text(p.get("text"))
            early = self.finished and isinstance(content, dict) and bool(content.get("parts"))
            if early:
                self.bad("gemini.finish", n, "content after a finishReason (that STOP was not the turn's end)")
            if isinstance(c, dict) and c.get("finishReason"):
                self.finished = True
                self.last_unfinished = None
                self.finish = c["finishReason"]
                if c["finishReason"] not in stops.OWN["gemini"]:
                    self.bad("stop.reason", n, f"finishReason {c['finishReason']!r} is not a Gemini finish reason")
            elif isinstance(c, dict) and not early:
                self.last_unfinished = n
        for why in usage_math.problems("gemini", obj.get("usageMetadata")):
            self.bad("usage.sums", n, why)

    def end(self) -> None:
        if self.error:
            return
        if self.finish not in (None, "STOP", "FINISH_REASON_UNSPECIFIED"):
            self.ev.verdict.native("max_tokens", f"finishReason {self.finish!r}")
        elif self.finish == "STOP" and (d := self.ev.cut()) is not None:
            self.bad("terminal.truncated", None, f"finishReason 'STOP', but {d.receipt()}")
        if not self.finished:
            self.bad("terminal.present", None, "no candidate with finishReason before the end")
        elif self.last_unfinished is not None:
            self.bad("gemini.finish", self.last_unfinished, "candidate chunk after the one with finishReason")


_APIS = {"responses": _Responses, "chat": _Chat, "messages": _Messages, "gemini": _Gemini}


class _Sink:
    """Where a stream's violations go: the checker and its API's contract share it (the
    contract holding a bound method of the checker would make a reference cycle, and every
    checked flow would wait for a full garbage collection)."""

    __slots__ = ("dropped", "violations")

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.dropped = 0

    def __call__(self, rule: str, n: int | None, reason: str) -> None:
        if len(self.violations) < MAX_VIOLATIONS:
            self.violations.append(Violation(rule, n, reason))
        else:
            self.dropped += 1


class StreamChecker:
    """Feed a stream's bytes; read :attr:`violations`. Never changes or keeps the bytes."""

    __slots__ = ("_bad", "_closed", "_contract", "_end", "_parser", "api", "events", "prefix", "violations")

    def __init__(self, api: str, prefix: bool = False, client: str | None = None, request: Any = None) -> None:
        """``client``: who reads the stream, where the contract depends on it (``"codex"``:
        the Codex backend's own events are Codex's, rule ``sse.vendor``); ``request``: the
        client's request body, when known (its output cap is evidence for rule
        ``terminal.truncated``)."""
        if api not in _APIS:
            raise ValueError(f"unknown API {api!r}; known: {', '.join(_APIS)}")
        self.api = api
        self._bad = _Sink()
        self.violations: list[Violation] = self._bad.violations
        self.events = 0
        self._parser = SseParser()
        self._contract: _Api = _Responses(self._bad, client == "codex") if api == "responses" else _APIS[api](self._bad)
        self._contract.ev = _Evidence(request)
        self._closed = False
        self._end = b""  # the stream's last 3 bytes (sse.cr_end)
        self.prefix = prefix
        """The bytes are a cut stream's prefix: see the module docstring."""

    @property
    def dropped(self) -> int:
        """Violations beyond :data:`MAX_VIOLATIONS`, counted, not kept."""
        return self._bad.dropped

    def feed(self, chunk: bytes) -> list[Violation]:
        """Check the events this chunk completes; returns the new violations."""
        before = len(self.violations)
        if chunk:
            self._end = chunk[-3:] if len(chunk) >= 3 else (self._end + chunk)[-3:]
        for ev in self._parser.feed(chunk):
            self._event(ev)
        return self.violations[before:]

    def close(self) -> list[Violation]:
        """End of stream; returns all violations."""
        if not self._closed:
            self._closed = True
            for ev in self._parser.close():
                if ev.complete or not self.prefix:
                    self._event(ev)
            if not self.events:
                if not self.prefix:
                    self._bad("terminal.present", None, "no event at all (an empty body, or only comments)")
            else:
                self._contract.end()
            if self.prefix:  # what only a whole stream can satisfy
                self.violations[:] = [v for v in self.violations if not (v.event is None and v.rule in END_RULES)]
            elif cr_cut(self._end):
                self._bad("sse.cr_end", None, "CR-only framing ends right after the last event's blank line")
        return self.violations

    def _event(self, ev: Event) -> None:
        if ev.is_comment_only:
            return
        n = self.events
        self.events += 1
        if not ev.complete:
            self._bad("sse.unterminated", n, "the stream ends inside this event")
        why = foreign(self.api, ev)
        if why is not None:
            self._bad(why[0], n, why[1])
            return
        data = ev.data
        name = ev.event
        if data is None:
            return  # id:/retry: only
        if data.strip() == b"[DONE]":
            self._contract.done_sentinel(n)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if obj is None and glued_at(ev.raw) is not None:
            self._bad("sse.glued", n, "data is not JSON and an event: line follows a data: line (two events glued)")
            return
        if not isinstance(obj, dict):
            self._bad("sse.not_json", n, f"data is not a JSON object ({len(data)} bytes)")
            return
        if name is not None and not self._contract.standard_name(name, obj):
            self._bad("sse.nonstandard", n, f"event name {name!r} for data of type {obj.get('type')!r}")
            return
        self._contract.event(n, obj)


def check(
    api: str, body: bytes, prefix: bool = False, client: str | None = None, request: Any = None
) -> list[Violation]:
    """All violations of a whole SSE body (``prefix``: of what a client got of a cut
    stream, see the module docstring; ``client``, ``request``: see :class:`StreamChecker`)."""
    c = StreamChecker(api, prefix, client, request)
    c.feed(body)
    return c.close()


# --- non-streamed (JSON) bodies ------------------------------------------------------------


def check_json(api: str, body: Any, request: Any = None) -> list[Violation]:
    """The violations of a non-streamed response body (a JSON object, or its bytes): the
    same rules as a stream's, where a whole body can break them (``event`` is None; the
    reason names the field). Not an object: ``sse.not_json`` (the rule of data that is not
    a JSON object)."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return [Violation("sse.not_json", None, f"the body is not JSON ({len(body)} bytes)")]
    if not isinstance(body, dict):
        return [Violation("sse.not_json", None, "the body is not a JSON object")]
    if api not in _APIS:
        raise ValueError(f"unknown API {api!r}; known: {', '.join(_APIS)}")
    out: list[Violation] = []

    def bad(rule: str, reason: str) -> None:
        out.append(Violation(rule, None, reason))

    if "error" in body and not any(k in body for k in ("output", "choices", "content", "candidates")):
        return out  # an error object: a failure, told as one
    ev = _Evidence(request)
    if api == "responses":
        _json_responses(body, bad, ev)
    elif api == "chat":
        _json_chat(body, bad, ev)
    elif api == "messages":
        _json_messages(body, bad, ev)
    else:
        _json_gemini(body, bad, ev)
    return out


def _json_responses(r: dict[str, Any], bad, ev: _Evidence) -> None:
    status = r.get("status")
    missing = [k for k in ("id", "model") if not isinstance(r.get(k), str)]
    if not _is_num(r.get("created_at")):
        missing.insert(1, "created_at")
    if missing:
        bad("response.fields", f"response without {', '.join(missing)}")
    output = r.get("output")
    if not isinstance(output, list):
        bad("terminal.output", "response without an output list")
    for k, o in enumerate(_seq(output)):
        if not isinstance(o, dict):
            continue
        need = ["id"] + (["call_id", "name", "arguments"] if o.get("type") == "function_call" else [])
        lacking = [f for f in need if not isinstance(o.get(f), str)]
        if lacking:
            bad("item.fields", f"output[{k}] {o.get('type')} without {', '.join(lacking)}")
        if o.get("type") == "function_call":
            if o.get("status") not in ("completed", "incomplete"):
                bad("function_call.status", f"output[{k}] function_call with status {o.get('status')!r}")
            ev.whole_args(k, o.get("arguments"))
        elif o.get("type") == "reasoning" and not isinstance(o.get("summary"), list):
            bad("reasoning.summary", f"output[{k}] reasoning without a summary list")
        elif o.get("type") == "message":
            for part in _seq(o.get("content")):
                if isinstance(part, dict) and part.get("type") == "output_text":
                    ev.text(part.get("text"))
    if status in ("failed", "cancelled") or r.get("error"):
        return
    u = r.get("usage")
    if not isinstance(u, dict) or not all(_is_int(u.get(k)) for k in ("input_tokens", "output_tokens", "total_tokens")):
        bad(
            "terminal.usage",
            f"response usage {'missing' if u is None else 'without integer input/output/total tokens'}",
        )
    for why in usage_math.problems("responses", u):
        bad("usage.sums", why)
    reason = (
        (r.get("incomplete_details") or {}).get("reason") if isinstance(r.get("incomplete_details"), dict) else None
    )
    if status == "incomplete":
        if not reason:
            bad("terminal.incomplete_reason", "status incomplete without incomplete_details.reason")
        elif reason not in stops.OWN["responses"]:
            bad("stop.reason", f"incomplete_details.reason {reason!r} is not a Responses reason")
        return
    if isinstance(u, dict):
        ev.verdict.usage(u.get("output_tokens"))
    if (d := ev.cut()) is not None:
        bad("terminal.truncated", f"status {status!r}, but {d.receipt()}")


def _json_chat(body: dict[str, Any], bad, ev: _Evidence) -> None:
    choices = body.get("choices")
    if not isinstance(choices, list):
        bad("sse.nonstandard", "chat.completion without choices")
        return
    if zeroed_completion(body):
        bad("terminal.hidden_failure", ZEROED_COMPLETION)
        return
    u = body.get("usage")
    for why in usage_math.problems("chat", u):
        bad("usage.sums", why)
    if isinstance(u, dict):
        ev.verdict.usage(u.get("completion_tokens"))
    normal = None
    for ch in choices:
        if not isinstance(ch, dict):
            continue
        ci = ch.get("index", 0)
        msg = _obj(ch.get("message"))
        ev.text(msg.get("content"))
        ids = [tc.get("id") for tc in _seq(msg.get("tool_calls")) if isinstance(tc, dict)]
        if len({_k(i) for i in ids}) < len(ids):
            bad("chat.tool_index", f"choice {ci}: tool call ids not unique ({len(ids)} calls)")
        for k, tc in enumerate(_seq(msg.get("tool_calls"))):
            if isinstance(tc, dict):
                ev.whole_args((ci, k), _obj(tc.get("function")).get("arguments"))
        fr, native = ch.get("finish_reason"), ch.get("native_finish_reason")
        if fr is None:
            bad("terminal.present", f"choice {ci} without finish_reason")
        elif fr not in stops.OWN["chat"]:
            bad("stop.reason", f"choice {ci}: finish_reason {fr!r} is not a chat finish reason")
        elif stops.native_disagrees(fr, native) is not None:
            bad("stop.reason", f"choice {ci}: finish_reason {fr!r} while native_finish_reason says {native!r}")
        if fr in ("length", "content_filter"):
            ev.verdict.native("max_tokens", f"finish_reason {fr!r}")
        elif fr in ("stop", "tool_calls"):
            normal = fr
    if normal is not None and len(choices) == 1 and (d := ev.cut()) is not None:
        bad("terminal.truncated", f"finish_reason {normal!r}, but {d.receipt()}")


def _json_messages(body: dict[str, Any], bad, ev: _Evidence) -> None:
    if body.get("type") != "message" or not isinstance(body.get("content"), list):
        bad("messages.start", "the body is not a message with a content list")
        return
    ids = [b.get("id") for b in body["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    if len({_k(i) for i in ids}) < len(ids):
        bad("chat.tool_index", f"tool_use ids not unique ({len(ids)} blocks)")
    for k, b in enumerate(body["content"]):
        if isinstance(b, dict) and b.get("type") == "text":
            ev.text(b.get("text"))
        elif isinstance(b, dict) and b.get("type") == "tool_use":
            ev.whole_args(k, orjson.dumps(b.get("input")).decode() if "input" in b else None)
    sr = body.get("stop_reason")
    if sr is None:
        bad("messages.stop_reason", "message without stop_reason")
    elif sr not in stops.OWN["messages"]:
        bad("stop.reason", f"stop_reason {sr!r} is not a Messages stop reason")
    for why in usage_math.problems("messages", body.get("usage")):
        bad("usage.sums", why)
    if isinstance(body.get("usage"), dict):
        ev.verdict.usage(body["usage"].get("output_tokens"))
    if sr in ("end_turn", "tool_use", "stop_sequence") and (d := ev.cut()) is not None:
        bad("terminal.truncated", f"stop_reason {sr!r}, but {d.receipt()}")


def _json_gemini(body: dict[str, Any], bad, ev: _Evidence) -> None:
    cands = body.get("candidates")
    if not isinstance(cands, list):
        if "promptFeedback" not in body:
            bad("sse.nonstandard", "a generateContent body without candidates or promptFeedback")
        return
    um = body.get("usageMetadata")
    for why in usage_math.problems("gemini", um):
        bad("usage.sums", why)
    if isinstance(um, dict) and type(um.get("candidatesTokenCount")) is int:
        t = um.get("thoughtsTokenCount")
        ev.verdict.usage(um["candidatesTokenCount"] + (t if type(t) is int else 0))
    for c in cands:
        if not isinstance(c, dict):
            continue
        for p in _seq(_obj(c.get("content")).get("parts")):
            if isinstance(p, dict) and not p.get("thought"):
                ev.text(p.get("text"))
        fr = c.get("finishReason")
        if fr is None:
            bad("terminal.present", "a candidate without finishReason")
        elif fr not in stops.OWN["gemini"]:
            bad("stop.reason", f"finishReason {fr!r} is not a Gemini finish reason")
        elif fr == "STOP" and len(cands) == 1 and (d := ev.cut()) is not None:
            bad("terminal.truncated", f"finishReason 'STOP', but {d.receipt()}")


def guess_json_api(obj: Any) -> str | None:
    """Which API a non-streamed body speaks, from its own fields."""
    if not isinstance(obj, dict):
        return None
    if obj.get("object") == "response" or ("output" in obj and "status" in obj):
        return "responses"
    if obj.get("object") == "chat.completion" or "choices" in obj:
        return "chat"
    if obj.get("type") == "message":
        return "messages"
    if "candidates" in obj or "promptFeedback" in obj:
        return "gemini"
    return None


def guess_api(body: bytes) -> str | None:
    """Which API an SSE body speaks, from its first events (for bodies saved without
    their request)."""
    head = body[:65536]
    if b'"response.' in head:
        return "responses"
    if b"chat.completion.chunk" in head or b'"choices"' in head:
        return "chat"
    if b'"message_start"' in head or b'"content_block_' in head:
        return "messages"
    if b'"candidates"' in head:
        return "gemini"
    return None
