"""Stop reasons across the APIs: what each value means, and each API's own word for it.

Every API ends a turn with a reason from its own vocabulary: chat ``finish_reason``,
Messages ``stop_reason``, Gemini ``finishReason``, Responses ``incomplete_details.reason``
(a normal end there is ``response.completed``, no reason). A gateway that translates
between them sometimes writes one API's value into another (CPA's Gemini chat translator
writes ``"max_tokens"``; others pass Anthropic's ``refusal`` or a lower-cased Gemini
``safety`` through), or a normal value beside its own ``native_finish_reason`` that says
otherwise (CPA: ``"stop"`` with ``native_finish_reason: "safety"``). A client knows only
its API's values: the AI SDK maps anything else to ``other``/``unknown`` and openai-python's
helpers never raise their length or content-filter errors, so a truncation or a filtered
answer reads as a normal end.

:data:`MEANING` maps every known value (of any API, any case) to what it says
(:data:`Meaning`); :func:`spec` gives an API's own value for a meaning. Rule
``finish_reason`` (wire/rules.py) writes the API's own value in place of a foreign one
(:func:`foreign`) and, on chat, the value a ``native_finish_reason`` says when the
``finish_reason`` beside it is a normal end (:func:`native_disagrees`); the contract
(wire/contract.py, rule ``stop.reason``) reports both.

``pause_turn`` (Anthropic: a server-tool turn paused, to be continued by sending it back)
is an unfinished turn. No other API has a word for it, and it must never read as a normal
end: it is written as each API's word for an unfinished answer, ``length`` (chat),
``response.incomplete`` with ``max_output_tokens`` (Responses), ``MAX_TOKENS`` (Gemini),
so that every client treats the turn as not done (the AI SDK finish ``length``,
openai-python's ``LengthFinishReasonError``, Codex fails the turn instead of ending it);
the receipt names ``pause_turn``. ``model_context_window_exceeded`` likewise.

``declined`` is no stop value: it is what the upstream leg reads when an OpenAI provider
refused in its content (chat ``delta.refusal``, a Responses ``refusal`` part) and ended
normally (``stop``, ``response.completed``), as OpenAI's APIs say a refusal. Chat and
Responses clients read the refusal there and the normal end stays; Messages and Gemini
say a refusal with their stop value only (``refusal``, ``SAFETY``).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "MEANING",
    "OWN",
    "Meaning",
    "foreign",
    "meaning",
    "names_error",
    "native_disagrees",
    "outcome",
    "says",
    "spec",
]

Meaning = Literal["end", "tool", "length", "filter", "refusal", "context", "pause", "declined"]

OWN: Final[dict[str, frozenset[str]]] = {
    "chat": frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"}),
    "messages": frozenset(
        {
            "end_turn",
            "max_tokens",
            "stop_sequence",
            "tool_use",
            "pause_turn",
            "refusal",
            "model_context_window_exceeded",
        }
    ),
    "gemini": frozenset(
        {
            "FINISH_REASON_UNSPECIFIED",
            "STOP",
            "MAX_TOKENS",
            "SAFETY",
            "RECITATION",
            "LANGUAGE",
            "OTHER",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "MALFORMED_FUNCTION_CALL",
            "IMAGE_SAFETY",
            "UNEXPECTED_TOOL_CALL",
            "TOO_MANY_TOOL_CALLS",
            "MODEL_ARMOR",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
            "IMAGE_OTHER",
            "NO_IMAGE",
            "MISSING_THOUGHT_SIGNATURE",
        }
    ),
    "responses": frozenset({"max_output_tokens", "content_filter"}),
}
"""Each API's own stop values (Gemini's ``FinishReason`` enum as the API reference lists
it; Responses: the reasons of ``incomplete_details``)."""

MEANING: Final[dict[str, Meaning]] = {
    # OpenAI (chat, Responses)
    "stop": "end",
    "tool_calls": "tool",
    "function_call": "tool",
    "length": "length",
    "content_filter": "filter",
    "max_output_tokens": "length",
    "context_length_exceeded": "context",
    # Anthropic
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool",
    "max_tokens": "length",
    "refusal": "refusal",
    "model_context_window_exceeded": "context",
    "pause_turn": "pause",
    # Gemini (any case: CPA's non-stream chat translator lower-cases them)
    "STOP": "end",
    "MAX_TOKENS": "length",
    "SAFETY": "filter",
    "RECITATION": "filter",
    "BLOCKLIST": "filter",
    "PROHIBITED_CONTENT": "filter",
    "SPII": "filter",
    "IMAGE_SAFETY": "filter",
    "IMAGE_PROHIBITED_CONTENT": "filter",
    "IMAGE_RECITATION": "filter",
    "MODEL_ARMOR": "filter",
}
"""What a stop value says (values not here, e.g. Gemini's ``MALFORMED_FUNCTION_CALL`` or
``OTHER``, have no equivalent in another API and are left as they are)."""

_SPEC: Final[dict[str, dict[Meaning, str]]] = {
    "chat": {
        "end": "stop",
        "tool": "tool_calls",
        "length": "length",
        "filter": "content_filter",
        "refusal": "content_filter",
        "context": "length",
        "pause": "length",
    },
    "messages": {
        "end": "end_turn",
        "tool": "tool_use",
        "length": "max_tokens",
        "filter": "refusal",
        "refusal": "refusal",
        "context": "model_context_window_exceeded",
        "pause": "pause_turn",
        "declined": "refusal",
    },
    "gemini": {
        "end": "STOP",
        "tool": "STOP",
        "length": "MAX_TOKENS",
        "filter": "SAFETY",
        "refusal": "SAFETY",
        "context": "MAX_TOKENS",
        "pause": "MAX_TOKENS",
        "declined": "SAFETY",
    },
    "responses": {
        "length": "max_output_tokens",
        "filter": "content_filter",
        "refusal": "content_filter",
        "context": "max_output_tokens",
        "pause": "max_output_tokens",
    },
}


def meaning(value: object) -> Meaning | None:
    """What a stop value of any API says (None: unknown, or no equivalent)."""
    if not isinstance(value, str):
        return None
    return MEANING.get(value) or MEANING.get(value.upper()) or MEANING.get(value.lower())


def spec(api: str, m: Meaning) -> str | None:
    """``api``'s own value for meaning ``m`` (Responses: an ``incomplete_details.reason``;
    a normal end there has none: None; chat and Responses have none for ``declined``, whose
    normal end they keep)."""
    return _SPEC[api].get(m)


def foreign(api: str, value: object) -> str | None:
    """``api``'s own value for a stop value it does not define (None: the value is its
    own, not a string, or has no equivalent)."""
    if not isinstance(value, str) or value in OWN[api]:
        return None
    m = meaning(value)
    return spec(api, m) if m is not None else None


_NOT_DONE: Final = frozenset({"length", "filter", "refusal", "context", "pause"})


def native_disagrees(finish: object, native: object) -> str | None:
    """Chat: the ``finish_reason`` a gateway's ``native_finish_reason`` says, when the
    ``finish_reason`` beside it claims a normal end (``stop``, ``tool_calls``) and the
    native one does not (``safety`` -> ``content_filter``, ``max_tokens`` -> ``length``);
    else None."""
    if finish not in ("stop", "tool_calls"):
        return None
    m = meaning(native)
    return spec("chat", m) if m in _NOT_DONE else None


def outcome(value: object) -> Literal["max_tokens", "content_filter"] | None:
    """The verdict outcome a stop value says (``wire.verdict``), if it says the turn did
    not end normally."""
    return says(meaning(value))


def says(m: Meaning | str | None) -> Literal["max_tokens", "content_filter"] | None:
    """The verdict outcome a meaning says, if not a normal end."""
    if m in ("length", "context", "pause"):
        return "max_tokens"
    if m in ("filter", "refusal", "declined"):
        return "content_filter"
    return None


DEFAULT: Final[dict[str, Meaning]] = {"max_tokens": "length", "content_filter": "filter"}
"""The meaning a verdict outcome has when no stop value says more (``wire.verdict.Decision.word``)."""


def names_error(fr: object) -> bool:
    """A chat finish_reason outside chat's words that names an error (``error``, or ending
    ``_error``: Anthropic's error types passed on as a finish; rule error_finish)."""
    return isinstance(fr, str) and fr not in OWN["chat"] and (fr.lower() == "error" or fr.lower().endswith("_error"))
