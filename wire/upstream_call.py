"""What one upstream (provider) call said, once read: the facts every provider decoder
records (``wire/upstream_decoders.py``), in one shape the correlator and the verdict use.

Per call, from the provider's own stream as CPA reads it:

- ``finish``: the provider's finish or stop reason, its raw value (``MAX_TOKENS``,
  ``refusal``, ``length``, ``incomplete/max_output_tokens``...), with the field it came from;
- ``usage``: input (the whole prompt, the cached part included), output (everything the
  model generated, thoughts included, as the OpenAI APIs count it), reasoning/thought,
  cached, total, as a :class:`wire.verdict.UpstreamUsage` (``authoritative``: the client
  leg's counts are corrected to these, not only filled where missing);
- ``errors``: the in-band errors (an ``{"error": ...}`` frame in a 200 stream, an
  ``event: error``, ``response.failed``, an interaction that failed): code and status,
  never content;
- ``ended``: how the body ended: ``finish`` (cleanly, after a finish), ``no_finish``
  (cleanly, but the provider never said it finished), ``cut`` (the connection failed or
  the body stopped inside an event or a JSON value).

:attr:`CallResult.outcome` turns that into the verdict's terms: an error, a cut body or a
body that ended without a finish is ``failed``; a truncation is ``max_tokens``; a safety or
refusal stop is ``content_filter``, and so is an OpenAI refusal said in content before a
normal end (``declined``); a normal end is ``complete``; a reason that proves nothing
(Gemini ``OTHER``) is ``unknown`` and the client leg's own rules decide.
:attr:`CallResult.meaning` says which kind of unfinished or filtered end it was
(:mod:`wire.stops`), for each client API's own word. Nothing here holds content: text and tool-call arguments are only hashed
(:meth:`wire.verdict.Verdict.digest`'s hash), to match the client flow they served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import stops
from .verdict import Outcome, UpstreamUsage

__all__ = ["PROVIDER_NAMES", "CallResult", "Ending"]

Ending = Literal["finish", "no_finish", "cut"]

PROVIDER_NAMES = {
    "gemini": "Gemini",
    "interactions": "Gemini Interactions",
    "anthropic": "Anthropic",
    "openai_chat": "OpenAI chat",
    "responses": "Responses",
    "devin": "Devin",
}
"""Provider key -> the name receipts use."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """One provider call, read to its end (or to its decisive event, see ``decided``)."""

    provider: str
    """A key of :data:`PROVIDER_NAMES`."""
    finish: str | None
    """The provider's finish/stop reason, raw (None: none was sent)."""
    finish_field: str
    """Where ``finish`` came from (``finishReason``, ``stop_reason``, ``status``...)."""
    says: Outcome | None
    """What ``finish`` alone means (None: no finish); see :attr:`outcome`."""
    usage: UpstreamUsage | None
    errors: tuple[str, ...]
    ended: Ending | None
    """None while the body has not ended (a result taken at the decisive event)."""
    digest: tuple[str, int, str, int]
    events: int
    bad: int
    """Events (or the JSON body) that did not parse: skipped, the bytes went on."""
    framing: str = "sse"
    """``sse`` or ``json``."""
    declined: bool = False
    """An OpenAI refusal: refusal content (chat ``delta.refusal``, a Responses ``refusal``
    part) before a normal finish (:data:`wire.stops.Meaning` ``declined``)."""

    @property
    def name(self) -> str:
        return PROVIDER_NAMES.get(self.provider, self.provider)

    @property
    def outcome(self) -> Outcome:
        """The verdict outcome: ``failed`` for an in-band error, a cut body or a clean end
        without a finish; else what the finish says (``unknown`` when it proves nothing)."""
        if self.errors or self.ended == "cut":
            return "failed"
        if self.finish is None:
            return "failed" if self.ended == "no_finish" else "unknown"
        if self.declined and self.says == "complete":
            return "content_filter"
        return self.says or "unknown"

    @property
    def meaning(self) -> str | None:
        """What kind of unfinished or filtered end :attr:`outcome` is (a
        :data:`wire.stops.Meaning`: ``length``, ``context``, ``pause``, ``filter``,
        ``refusal``, ``declined``), from the raw stop value; None for any other outcome."""
        out = self.outcome
        if out not in ("max_tokens", "content_filter"):
            return None
        if self.declined and self.says == "complete":
            return "declined"
        m = stops.meaning((self.finish or "").rpartition("/")[2])
        return m if stops.says(m) == out else None

    def detail(self) -> str:
        """For a receipt, a log line and the mitmweb comment: which frame said what,
        never content (``Gemini finishReason MAX_TOKENS``; ``Anthropic stop_reason refusal``;
        ``Gemini in-band error 503 UNAVAILABLE``; ``Gemini: body ended without a
        finishReason``; ``OpenAI chat: body cut``)."""
        parts: list[str] = []
        if self.errors:
            more = f" (+{len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
            parts.append(f"in-band error {self.errors[0]}{more}")
        if self.finish is not None:
            parts.append(f"{self.finish_field} {self.finish}")
            if self.declined and self.says == "complete":
                parts.append("after a refusal")
        if self.ended == "cut":
            parts.append("body cut")
        elif self.ended == "no_finish" and self.finish is None:
            parts.append(f"body ended without a {self.finish_field}")
        elif self.ended is None and self.finish is None and not self.errors:
            parts.append("no finish yet")
        return f"{self.name} {', '.join(parts)}"

    def counts(self) -> UpstreamUsage | None:
        """The usage for the verdict (:meth:`wire.verdict.Verdict.upstream_usage`)."""
        return self.usage
