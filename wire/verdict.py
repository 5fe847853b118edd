"""How did the stream end? The one place that decides, from evidence collected per flow.

Repairers and the upstream tap *report* evidence (:class:`Verdict`'s ``observe_*``,
``usage``, ``tool_args``, ``native``, ``upstream``); only :meth:`Verdict.decide` turns it
into an :data:`Outcome`, with each piece naming its source (:data:`SOURCES`, each
switchable: ``streamfix_evidence``), so a receipt can say why. A gateway's own signal
wins, unless it names an unfinished turn and the provider's own stream (the upstream leg)
names another end that is not a normal one: the provider's is the truth. A failure is
never decided to be a success. What each source decides alone, how they combine and the
usage == cap rule: docs/truncation.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from . import stops

Outcome = Literal["complete", "max_tokens", "content_filter", "failed", "unknown"]
"""``failed``: only from the upstream leg (the provider's in-band error, a cut body, a body
that ended without a finish): the client stream ends as a failure in its API's shape."""

HASH_BATCH: Final = 2048
"""Bytes a :class:`Digest` hashes at once."""


class Digest:
    """A running blake2b of bytes that come in pieces, and how many there were: what both
    legs of a turn hash of its text and of its tool-call arguments (:meth:`Verdict.digest`,
    the Devin tap's :meth:`wire.devin.Tap.digest`), so that the two can be matched. The
    pieces are hashed :data:`HASH_BATCH` bytes at a time (one hash call per delta cost
    more than the rest of a delta's bookkeeping; a streamed hash of the same bytes in
    any batches is the same)."""

    __slots__ = ("_hash", "_pending", "size")

    def __init__(self) -> None:
        self._hash: Any = hashlib.blake2b()
        self._pending = bytearray()
        self.size = 0

    def add(self, piece: bytes) -> None:
        pending = self._pending
        pending += piece
        self.size += len(piece)
        if len(pending) >= HASH_BATCH:
            self._hash.update(pending)
            pending.clear()

    def hexdigest(self) -> str:
        if self._pending:
            self._hash.update(self._pending)
            self._pending.clear()
        out: str = self._hash.hexdigest()
        return out


SOURCES = ("request_cap", "usage", "tool_args", "native", "upstream")
"""Evidence sources; each can be switched off by name."""

_CAP_FIELDS = ("max_output_tokens", "max_completion_tokens", "max_tokens")
"""Top-level cap spellings, in precedence order (the spec's preferred name first)."""


@dataclass(frozen=True, slots=True)
class UpstreamUsage:
    """The usage the gateway's upstream reported for the turn (Devin, in CPA's mapping).

    ``input_tokens`` is the whole input (uncached prompt + cache read), ``cached_tokens``
    the cache-read part of it, ``total_tokens`` = input + output. ``source`` says where
    Devin put it: ``"field7"`` (its usage message) or ``"field28"`` (the "Token Usage"
    display group, CPA's fallback when field 7 is missing or zero). ``model`` is the model
    Devin really used (field 7.9; "" when unknown).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    model: str = ""
    source: str = "field7"
    """Devin: ``field7`` or ``field28``; another provider: the frame it came from
    (``usageMetadata``, ``message_delta``, ``usage``...)."""
    reasoning_tokens: int = 0
    """The thought/reasoning part of ``output_tokens`` (Gemini ``thoughtsTokenCount``,
    OpenAI ``reasoning_tokens``); 0 when the provider does not split it out."""
    authoritative: bool = False
    """A provider's own complete usage (every decoder but Devin's): the client leg's counts
    that differ are corrected to these, not only the missing or zero ones filled."""

    @property
    def uncached_input_tokens(self) -> int:
        """The input not read from a cache (Devin 7.2): Anthropic's ``input_tokens``."""
        return max(self.input_tokens - self.cached_tokens, 0)

    @property
    def candidates_tokens(self) -> int:
        """The output without its thoughts: Gemini's ``candidatesTokenCount``."""
        return max(self.output_tokens - self.reasoning_tokens, 0)

    def detail(self) -> str:
        """For a receipt (numbers and the model name, no content)."""
        s = (
            f"upstream usage input {self.input_tokens} (cached {self.cached_tokens}) "
            f"output {self.output_tokens} total {self.total_tokens}"
        )
        if self.reasoning_tokens:
            s = s.replace(
                f" total {self.total_tokens}", f" (reasoning {self.reasoning_tokens}) total {self.total_tokens}"
            )
        if self.model:
            s += f", model {self.model}"
        return s + f" ({self.source})"

    def fill(
        self, usage: dict[str, Any], fields: dict[str, str], total: str | None = None, parts: tuple[str, ...] = ()
    ) -> list[str]:
        """Fill ``usage`` (a client-leg usage object, changed in place) from these counts.

        ``fields`` maps a key (dotted for a nested one: ``"input_tokens_details.
        cached_tokens"``) to the attribute of this object that holds its value. A key that
        is missing, not an integer, or 0 is filled with a non-zero upstream count; a
        present non-zero integer is never overwritten (the client leg's own count wins),
        and an upstream 0 adds nothing (a missing count already reads as 0). ``total`` (with the ``parts`` it
        sums) is filled when it is missing or 0, and also when it was the sum of the parts
        before they were filled (then it was derived from the zeros just corrected).
        Returns the keys filled, in order; ``[]`` when nothing changed.
        """
        old_sum = sum(_int(_get(usage, k)) or 0 for k in parts)
        filled: list[str] = []
        for key, attr in fields.items():
            want = getattr(self, attr)
            cur = _get(usage, key)
            if self.authoritative and _int(cur) is not None and cur != want:
                pass  # the provider's own count corrects the gateway's
            elif _int(cur) or not want:  # the client leg's own non-zero number; or nothing to add
                continue
            if _put(usage, key, want):
                filled.append(key)
        if total is not None and self.authoritative and self.total_tokens:
            cur = _int(_get(usage, total))
            if cur != self.total_tokens and _put(usage, total, self.total_tokens):
                filled.append(total)
        elif total is not None:
            cur = _int(_get(usage, total))
            new_sum = sum(_int(_get(usage, k)) or 0 for k in parts)
            derived = cur == old_sum and any(k in filled for k in parts)
            if (not cur or derived) and new_sum and cur != new_sum and _put(usage, total, new_sum):
                filled.append(total)
        return filled

    def note(self, filled: list[str]) -> str:
        """The repairer's note (and receipt line) for keys :meth:`fill` filled."""
        how = "set" if self.authoritative else "filled"
        return f"usage {', '.join(filled)} {how} from the {self.detail()}"


def _get(obj: Any, key: str) -> Any:
    for name in key.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(name)
    return obj


def _put(obj: dict[str, Any], key: str, value: int) -> bool:
    *path, last = key.split(".")
    for name in path:
        nxt = obj.get(name)
        if nxt is None:
            nxt = obj[name] = {}
        if not isinstance(nxt, dict):
            return False  # a non-object where an object belongs: leave it
        obj = nxt
    obj[last] = value
    return True


@dataclass(frozen=True, slots=True)
class Evidence:
    source: str
    """One of :data:`SOURCES` (plus a sub-name after a dot, e.g. ``request_cap.max_tokens``)."""
    says: Outcome
    detail: str
    """Short, for a log line: numbers and field names, never prompt or output text."""
    meaning: str | None = None
    """What the provider's stop value meant (a :data:`wire.stops.Meaning`: ``pause``,
    ``context``, ``refusal``, ``declined``...), where the upstream leg read one: each API
    then says it in its own word (:meth:`Decision.word`)."""


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    evidence: tuple[Evidence, ...] = ()
    native: bool = False
    """The gateway reported this outcome itself: leave its terminal as it is."""

    @property
    def truncated(self) -> bool:
        return self.outcome in ("max_tokens", "content_filter")

    @property
    def failed(self) -> bool:
        """The upstream failed (its error, a cut body, no finish): end as a failure."""
        return self.outcome == "failed"

    def word(self, api: str) -> str | None:
        """The stop value ``api`` ends this turn with (chat ``finish_reason``, Messages
        ``stop_reason``, Gemini ``finishReason``, Responses ``incomplete_details.reason``)
        when the verdict is a truncation or a filtered answer; None: leave the gateway's
        end as it is (a normal end, a failure, or an OpenAI refusal on chat and Responses,
        which say it in content: :data:`wire.stops.DEFAULT`, ``declined``). The provider's
        own stop meaning, when the upstream leg read one, picks the word (``pause_turn``
        and ``model_context_window_exceeded`` on Messages), else the outcome's default."""
        if not self.truncated:
            return None
        m = next((e.meaning for e in self.evidence if e.meaning is not None and e.says == self.outcome), None)
        if m is None or stops.says(m) != self.outcome:
            m = stops.DEFAULT[self.outcome]
        return stops.spec(api, m)  # type: ignore[arg-type]

    def receipt(self) -> str:
        why = "; ".join(f"{e.source}: {e.detail}" for e in self.evidence) or "no evidence"
        return f"verdict {self.outcome} ({why})"


def _int(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


@dataclass(slots=True)
class Verdict:
    enabled: frozenset[str] = frozenset(SOURCES)
    cap: int | None = None
    cap_field: str | None = None
    output_tokens: int | None = None
    """Output tokens as the client leg reports them (last report wins)."""
    upstream_output_tokens: int | None = None
    """Output tokens as the upstream reported them (fills a missing/zero client usage)."""
    upstream_counts: UpstreamUsage | None = None
    """The whole usage the upstream reported (set by :meth:`upstream_usage` with an
    :class:`UpstreamUsage`, usually from the resolver); the repairers fill the client
    leg's missing or zero usage from it once :meth:`decide` has run."""
    last_tool_args: str | None = None
    last_tool_name: str | None = None
    """The name of the call :attr:`last_tool_args` belongs to, where the repairer knows it."""
    required: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Tool name -> the properties its declared schema requires (the request's ``tools``)."""
    _native: Evidence | None = None
    _upstream: Evidence | None = None
    notes: list[Evidence] = field(default_factory=list)
    resolver: Callable[[Verdict], None] | None = None
    """Called once, at the start of the first :meth:`decide`; the addon uses it to look
    up the matching upstream flow (by :meth:`digest`) and report its StopReason via
    :meth:`upstream`."""
    _text: Digest = field(default_factory=Digest)
    _args: Digest = field(default_factory=Digest)
    last_output: Literal["text", "args"] | None = None
    """Which kind of output was observed last (see the usage == cap rule)."""

    def _on(self, source: str) -> bool:
        return source in self.enabled

    # --- evidence in -------------------------------------------------------------
    def request(self, body: Any) -> None:
        """Read the output cap from the client's request body (any API's spelling; any
        JSON value, only an object is read)."""
        if not isinstance(body, dict):
            return
        if self._on("tool_args"):
            self.required = required_properties(body)
        if not self._on("request_cap"):
            return
        for name in _CAP_FIELDS:
            v = _int(body.get(name))
            if v is not None and v > 0:
                self.cap, self.cap_field = v, name
                return
        for gc_name, cap_name in (
            ("generationConfig", "maxOutputTokens"),
            ("generation_config", "max_output_tokens"),
        ):
            gc = body.get(gc_name)
            if isinstance(gc, dict):
                v = _int(gc.get(cap_name))
                if v is not None and v > 0:
                    self.cap, self.cap_field = v, f"{gc_name}.{cap_name}"
                    return

    def usage(self, output_tokens: Any) -> None:
        """Output tokens from the client leg's usage (last report wins)."""
        v = _int(output_tokens)
        if v is not None and v >= 0:
            self.output_tokens = v

    def upstream_usage(self, usage: Any) -> None:
        """The usage the upstream reported: an :class:`UpstreamUsage` (all counts, kept as
        :attr:`upstream_counts`) or just its output tokens (Devin 7.3 / field 28)."""
        if not self._on("upstream"):
            return
        if isinstance(usage, UpstreamUsage):
            self.upstream_counts = usage
            usage = usage.output_tokens
        v = _int(usage)
        if v is not None and v >= 0:
            self.upstream_output_tokens = v

    def fill_usage(
        self, usage: dict[str, Any], fields: dict[str, str], total: str | None = None, parts: tuple[str, ...] = ()
    ) -> list[str]:
        """:meth:`UpstreamUsage.fill` with :attr:`upstream_counts` (nothing without them).
        Call it after :meth:`decide`, which runs the resolver that finds them."""
        c = self.upstream_counts
        return [] if c is None else c.fill(usage, fields, total, parts)

    @property
    def output_tokens_best(self) -> tuple[int | None, str | None]:
        """(tokens, where from): the client leg's count, or the upstream's when the client
        leg has none or 0; (None, None) if neither has a non-zero count. Repairers may use
        it to fill a missing usage."""
        if self.output_tokens:
            return self.output_tokens, "client"
        if self.upstream_output_tokens:
            return self.upstream_output_tokens, "upstream"
        return None, None  # 0 is what CPA writes when it has no usage: not evidence

    def tool_args(self, arguments: str, name: Any = None) -> None:
        """The complete arguments string of a tool call, at its end (last call wins), and
        the call's name where the repairer has it (its schema's required properties)."""
        if isinstance(arguments, str):
            self.last_tool_args = arguments
            self.last_tool_name = name if isinstance(name, str) and name else None

    def observe_text(self, delta: str, utf8: bytes | None = None) -> None:
        """Generated text as the client sees it (message text, not reasoning), in order
        (``utf8``: its UTF-8, when the caller has it)."""
        if delta:
            self._text.add(delta.encode("utf-8", "surrogatepass") if utf8 is None else utf8)
            self.last_output = "text"

    def observe_args(self, delta: str, utf8: bytes | None = None) -> None:
        """Tool-call argument text as the client sees it, all calls, in order (``utf8``:
        its UTF-8, when the caller has it)."""
        if delta:
            self._args.add(delta.encode("utf-8", "surrogatepass") if utf8 is None else utf8)
            self.last_output = "args"

    def digest(self) -> tuple[str, int, str, int]:
        """(text hash, text bytes, args hash, args bytes): what the upstream leg must match."""
        return (self._text.hexdigest(), self._text.size, self._args.hexdigest(), self._args.size)

    @property
    def text_len(self) -> int:
        """Bytes of text observed (UTF-8)."""
        return self._text.size

    @property
    def args_len(self) -> int:
        """Bytes of tool-call arguments observed (UTF-8)."""
        return self._args.size

    def native(self, says: Outcome, detail: str) -> None:
        """The gateway's own explicit verdict (see the module docstring: never CPA's
        ``stop``/``tool_calls``/``end_turn``/``STOP``, which are what is in doubt)."""
        if self._on("native"):
            self._native = Evidence("native", says, detail)

    def upstream(self, says: Outcome, detail: str, output_tokens: Any = None, meaning: str | None = None) -> None:
        """The upstream's stop reason (and, optionally, its output token count and what
        its stop value meant: :attr:`Evidence.meaning`)."""
        if self._on("upstream"):
            self._upstream = Evidence("upstream", says, detail, meaning)
            if output_tokens is not None:
                self.upstream_usage(output_tokens)

    # --- the decision ------------------------------------------------------------
    def _resolve(self) -> None:
        """Run the resolver once (the upstream leg's record read); while its call is still
        open it puts itself back."""
        if self.resolver is not None:
            resolver, self.resolver = self.resolver, None
            resolver(self)

    def upstream_failed(self) -> bool:
        """``decide().failed and not decide().native``, without the client leg's heuristics
        (no parse of the last call's arguments): only the upstream leg says ``failed``."""
        self._resolve()
        return self._native is None and self._upstream is not None and self._upstream.says == "failed"

    def upstream_open(self) -> bool:
        """The provider call the request side linked to this flow is still open (the
        gateway wrote its finish before the provider's stream ended): a repairer holds
        that finish until the next event or the end, when the resolver looks again."""
        if self.resolver is None:
            return False
        self._resolve()
        return bool(getattr(self.resolver, "waiting", False))

    def decide(self) -> Decision:
        """The outcome from the evidence so far (cheap; may be called more than once)."""
        self._resolve()
        up = self._upstream if self._upstream is not None and self._upstream.says != "unknown" else None
        nat = self._native
        if nat is not None:
            if up is not None and up.says != nat.says and nat.says in _NOT_NORMAL and up.says in _DECISIVE:
                # the gateway's word for an unfinished turn against the provider's own stream,
                # which says another (LiteLLM: an OpenAI content_filter as max_tokens): the
                # provider's is the truth, and the terminal is rewritten to say it
                return Decision(up.says, (up, nat))
            return Decision(nat.says, (nat,), native=True)
        if up is not None:
            return Decision(up.says, (up,))
        return self._heuristics()

    def _missing(self, args: Any) -> list[str]:
        """The required properties (of the last call's declared schema) its parsed arguments lack."""
        want = self.required.get(self.last_tool_name or "")
        if not want or not isinstance(args, dict):
            return []
        return [k for k in want if k not in args]

    def _heuristics(self) -> Decision:
        found: list[Evidence] = []
        if self._upstream is not None:  # said "unknown": keep it in the receipt
            found.append(self._upstream)

        args_ok: bool | None = None
        args_last = False
        if self._on("tool_args") and self.last_tool_args is not None:
            args_ok, args = _parsed(self.last_tool_args)
            # without any observe_* calls, assume the call was the last output
            args_last = self.last_output in ("args", None)
            n = len(self.last_tool_args)
            if not args_ok and args_last:
                found.append(
                    Evidence("tool_args", "max_tokens", f"last tool call's arguments ({n} chars) are not valid JSON")
                )
            elif not args_ok:
                found.append(
                    Evidence(
                        "tool_args",
                        "complete",
                        f"last tool call's arguments ({n} chars) are not valid JSON, "
                        "but text followed them: not cut by a budget",
                    )
                )
            elif args_last and (missing := self._missing(args)):
                found.append(
                    Evidence(
                        "tool_args",
                        "unknown",
                        f"last tool call's arguments ({n} chars) parse but lack {', '.join(missing)}, "
                        f"required by {self.last_tool_name}'s schema",
                    )
                )
                args_ok = False  # parses, yet not the whole call its schema declares
            elif args_last:
                found.append(
                    Evidence("tool_args", "complete", f"last tool call's arguments ({n} chars) are complete JSON")
                )

        tokens, where = self.output_tokens_best
        if self._on("usage") and self.cap is not None and tokens is not None:
            src = "usage" if where == "client" else "usage.upstream"
            at = f"output tokens {tokens} {'>=' if tokens >= self.cap else '<'} {self.cap_field} {self.cap}"
            if tokens < self.cap:
                found.append(Evidence(src, "complete", at))
            elif args_ok and args_last:
                found.append(Evidence(src, "complete", at + ", but the last output is a whole tool call: nothing cut"))
            else:
                found.append(Evidence(src, "max_tokens", at))

        says = {e.says for e in found if e.source != "upstream"}
        if "max_tokens" in says:
            return Decision(
                "max_tokens",
                tuple(e for e in found if e.says == "max_tokens") + tuple(e for e in found if e.says != "max_tokens"),
            )
        if "complete" in says:
            return Decision("complete", tuple(found))
        return Decision("unknown", tuple(found))


_NOT_NORMAL: Final = frozenset({"max_tokens", "content_filter"})
_DECISIVE: Final = frozenset({"max_tokens", "content_filter", "failed"})


MAX_TOOLS = 512
"""Tools read of a request's declarations (more are not looked at)."""


def required_properties(body: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Tool name -> the properties its schema requires, from a request of any API: chat
    ``tools[].function.parameters``, Responses ``tools[]`` (``type: function``)
    ``.parameters``, Messages ``tools[].input_schema``, Gemini ``tools[].functionDeclarations[]``
    ``.parameters`` (or ``parametersJsonSchema``). Only the top level's ``required``."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return {}
    decls: list[Any] = []
    for t in tools[:MAX_TOOLS]:
        if not isinstance(t, dict):
            continue
        fn = t.get("function")
        if isinstance(fn, dict):
            decls.append(fn)
        for key in ("functionDeclarations", "function_declarations"):
            more = t.get(key)
            if isinstance(more, list):
                decls += more[:MAX_TOOLS]
        if isinstance(t.get("name"), str):
            decls.append(t)
    out: dict[str, tuple[str, ...]] = {}
    for d in decls:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            continue
        schema = next(
            (d[k] for k in ("parameters", "input_schema", "parametersJsonSchema") if isinstance(d.get(k), dict)), None
        )
        req = schema.get("required") if schema is not None else None
        if isinstance(req, list):
            names = tuple(r for r in req if isinstance(r, str))
            if names:
                out[d["name"]] = names
    return out


def _parsed(text: str) -> tuple[bool, Any]:
    """Does ``text`` parse as JSON, and to what."""
    try:
        return True, orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, None
