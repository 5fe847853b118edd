"""How did the stream end? The one place that decides, from evidence collected per flow.

Repairers and the upstream tap *report* evidence; only :meth:`Verdict.decide` turns it
into an outcome. Each piece of evidence names its source, so a receipt can say why.

Precedence (strongest first):
1. ``native``: the gateway said it itself (a fixed CPA's ``finish_reason: "length"``,
   ``response.incomplete``, ``stop_reason: "max_tokens"``...). Its verdict always wins and
   the terminal is left untouched (``Decision.native``).
2. ``upstream``: the gateway's upstream said why it stopped (Devin's StopReason).
3. heuristics from the client leg: usage reaching the request's cap, the last tool call's
   arguments not parsing as JSON.

This module is a first cut of the interface; the truncation issue owns its rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Outcome = Literal["complete", "max_tokens", "content_filter", "unknown"]

SOURCES = ("request_cap", "usage", "tool_args", "native", "upstream")
"""Evidence sources; each can be switched off by name."""


@dataclass(frozen=True, slots=True)
class Evidence:
    source: str
    """One of :data:`SOURCES` (plus a sub-name after a dot, e.g. ``request_cap.max_tokens``)."""
    says: Outcome
    detail: str
    """Short, for a log line: numbers and field names, never prompt or output text."""


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    evidence: tuple[Evidence, ...] = ()
    native: bool = False
    """The gateway reported this outcome itself: leave its terminal as it is."""

    @property
    def truncated(self) -> bool:
        return self.outcome in ("max_tokens", "content_filter")

    def receipt(self) -> str:
        why = "; ".join(f"{e.source}: {e.detail}" for e in self.evidence) or "no evidence"
        return f"verdict {self.outcome} ({why})"


@dataclass(slots=True)
class Verdict:
    enabled: frozenset[str] = frozenset(SOURCES)
    cap: int | None = None
    cap_field: str | None = None
    output_tokens: int | None = None
    last_tool_args: str | None = None
    _native: Evidence | None = None
    _upstream: Evidence | None = None
    notes: list[Evidence] = field(default_factory=list)
    resolver: Callable[["Verdict"], None] | None = None
    """Called at the start of :meth:`decide`; the addon uses it to look up the matching
    upstream flow (by :meth:`digest`) and report its StopReason via :meth:`upstream`."""
    _text: Any = field(default_factory=hashlib.blake2b)
    _args: Any = field(default_factory=hashlib.blake2b)
    text_len: int = 0
    args_len: int = 0

    def _on(self, source: str) -> bool:
        return source in self.enabled

    # --- evidence in -------------------------------------------------------------
    def request(self, body: dict[str, Any] | None) -> None:
        """Read the output cap from the client's request body (any API's spelling)."""
        if not body or not self._on("request_cap"):
            return
        for name in ("max_output_tokens", "max_completion_tokens", "max_tokens"):
            v = body.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                self.cap, self.cap_field = v, name
                return
        gc = body.get("generationConfig")
        if isinstance(gc, dict):
            v = gc.get("maxOutputTokens")
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                self.cap, self.cap_field = v, "generationConfig.maxOutputTokens"

    def usage(self, output_tokens: Any) -> None:
        if isinstance(output_tokens, int) and not isinstance(output_tokens, bool):
            self.output_tokens = output_tokens

    def tool_args(self, arguments: str) -> None:
        """The complete arguments string of a tool call, at its end (last call wins)."""
        self.last_tool_args = arguments

    def observe_text(self, delta: str) -> None:
        """Generated text as the client sees it (message text, not reasoning), in order."""
        if delta:
            b = delta.encode("utf-8", "surrogatepass")
            self._text.update(b)
            self.text_len += len(b)

    def observe_args(self, delta: str) -> None:
        """Tool-call argument text as the client sees it, all calls, in order."""
        if delta:
            b = delta.encode("utf-8", "surrogatepass")
            self._args.update(b)
            self.args_len += len(b)

    def digest(self) -> tuple[str, int, str, int]:
        """(text hash, text bytes, args hash, args bytes): what the upstream leg must match."""
        return (self._text.hexdigest(), self.text_len, self._args.hexdigest(), self.args_len)

    def native(self, says: Outcome, detail: str) -> None:
        if self._on("native"):
            self._native = Evidence("native", says, detail)

    def upstream(self, says: Outcome, detail: str) -> None:
        if self._on("upstream"):
            self._upstream = Evidence("upstream", says, detail)

    # --- the decision ------------------------------------------------------------
    def decide(self) -> Decision:
        if self.resolver is not None:
            resolver, self.resolver = self.resolver, None
            resolver(self)
        if self._native is not None and self._native.says != "complete":
            return Decision(self._native.says, (self._native,), native=True)
        if self._upstream is not None:
            return Decision(self._upstream.says, (self._upstream,))
        found: list[Evidence] = []
        if (
            self._on("usage")
            and self.cap is not None
            and self.output_tokens is not None
            and self.output_tokens >= self.cap
        ):
            found.append(
                Evidence(
                    "usage",
                    "max_tokens",
                    f"output tokens {self.output_tokens} >= {self.cap_field} {self.cap}",
                )
            )
        args_ok: bool | None = None
        if self._on("tool_args") and self.last_tool_args is not None:
            args_ok = _parses(self.last_tool_args)
            if not args_ok:
                found.append(
                    Evidence(
                        "tool_args",
                        "max_tokens",
                        f"last tool call's arguments ({len(self.last_tool_args)} chars) "
                        "are not valid JSON",
                    )
                )
        if found and not (args_ok and len(found) == 1 and found[0].source == "usage"):
            return Decision("max_tokens", tuple(found))
        if self._native is not None:
            return Decision("complete", (self._native,), native=True)
        return Decision("unknown" if not found else "complete", tuple(found))


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
