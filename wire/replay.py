"""Rule replay's one definition: is a text being sent twice? (LiteLLM #41109.)

A bridge that merges two message items of one turn into one sends the whole text again:
as one more delta, or as a second run of ordinary deltas. :func:`step` says what one
delta of a text is, given the text so far and the run of deltas held since a possible
repeat began; the chat and Responses repairers (which hold and release the deltas) and the
stream contract (which reports the repeat, ``text.replay``) all decide by it, the
repairers on a text's UTF-8 bytes, the contract on its characters (a string is a prefix
of another exactly when its UTF-8 bytes are).

One delta equal to the whole text so far, after two deltas or more, is a repeat. Else a
repeat *starts* at a delta boundary: the text has at least two deltas and
:data:`MIN_REPEAT` characters, and the new delta is a prefix of it (begins with the text's
first characters). It *continues* while the deltas since its start are still a prefix of
the text as it was when it started, and *completes* when they are that whole text, unless
that text is itself a phrase said over and over (``"ha "`` three times, ``"-"`` sixteen
times: :func:`power`), which is text, not a message sent twice. At the first divergence it
is no repeat, and the diverging delta may start a new one; any other event of the text's
stream ends it too (for chat, a chunk that is not :func:`pure_content`; for Responses, any
event but a text delta of the same part). So a text that merely repeats a phrase is never
cut: ``"ha ha ha"`` streamed as ``"ha", " ha", " ha"`` never starts one (a delta must
begin with the text's first characters), and ``"ha", " ", "ha", " ", "ha"`` only repeats
``"ha "``.

Cost: O(len(delta)) per delta (a prefix comparison in place), O(len(text)) once when a run
completes (:func:`power`).
"""

from __future__ import annotations

from typing import Any, Final, TypeVar, overload

__all__ = [
    "DIVERGED",
    "HOLD",
    "MIN_REPEAT",
    "PHRASE",
    "REPEATED",
    "START",
    "TEXT",
    "WHOLE",
    "power",
    "pure_content",
    "step",
]

MIN_REPEAT: Final = 16
"""The shortest text (in characters) a run of deltas is compared with."""

# what a delta is (step's answer)
TEXT: Final = 0
"""Text for the client: no repeat."""
WHOLE: Final = 1
"""One delta equal to the whole text so far: a repeat, dropped."""
START: Final = 2
"""A run that may repeat the text starts with this delta: hold it."""
HOLD: Final = 3
"""The held run goes on with this delta, still a prefix of the text: hold it too."""
REPEATED: Final = 4
"""With this delta the held run is the whole text again: the run is a repeat, dropped."""
PHRASE: Final = 5
"""With this delta the held run is the whole text, but the text is a phrase said over and
over: the run and this delta are text."""
DIVERGED: Final = 6
"""This delta leaves the text: the held run was text after all; release it, then ask
again for this delta with no run held (it may start one)."""

_Text = TypeVar("_Text", str, bytes, bytearray)


@overload
def step(text: str, end: int, held: int, deltas: int, chars: int, delta: str, may_start: bool = True) -> int: ...
@overload
def step(
    text: bytes | bytearray, end: int, held: int, deltas: int, chars: int, delta: bytes, may_start: bool = True
) -> int: ...
def step(text: Any, end: int, held: int, deltas: int, chars: int, delta: Any, may_start: bool = True) -> int:
    """What rule replay makes of one non-empty ``delta`` of a text (one of the constants above).

    ``text[:end]``: the text before the held run (the text a repeat would repeat); ``held``:
    how much of it the run held since a possible repeat began matched (-1: none held);
    ``deltas``: how many deltas ``text[:end]`` was streamed in; ``chars``: its length in
    characters; ``may_start``: whether this delta may start a run (chat: only a chunk that
    carries nothing but text, :func:`pure_content`)."""
    if held >= 0:
        if text.startswith(delta, held, end):
            if held + len(delta) < end:
                return HOLD
            return PHRASE if power(text if end == len(text) else text[:end]) else REPEATED
        return DIVERGED
    if deltas >= 2 and len(delta) <= end and text.startswith(delta, 0, end):
        if len(delta) == end:
            return WHOLE
        if may_start and chars >= MIN_REPEAT:
            return START
    return TEXT


def power(s: _Text) -> bool:
    """Is ``s`` a shorter string said twice or more (``"abab"``, ``"---"``)? O(len(s)).
    Of a string and of its UTF-8 bytes alike."""
    return len(s) > 1 and (s + s).find(s, 1) < len(s)


def pure_content(obj: dict[str, Any]) -> tuple[Any, str] | None:
    """A chat chunk that carries only text for one choice (``(index, content)``): the only
    chunk that starts or continues a run; ``role`` and empty or null fields are allowed
    beside ``content``. Anything else (a tool call, a finish, usage, a second choice, an
    error) ends one."""
    choices = obj.get("choices")
    if "error" in obj or not isinstance(choices, list) or len(choices) != 1 or obj.get("usage") is not None:
        return None
    ch = choices[0]
    if not isinstance(ch, dict) or ch.get("finish_reason") is not None:
        return None
    delta = ch.get("delta")
    if not isinstance(delta, dict) or not isinstance(delta.get("content"), str):
        return None
    for k, v in delta.items():
        if v and k not in ("content", "role"):
            return None
    return ch.get("index", 0), delta["content"]
