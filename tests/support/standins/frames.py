"""A provider body as the fakes build it: its frames in order, and where its content ends.

Every fake provider (``fake_providers.py``, ``provider_gemini.py``, ``provider_responses.py``)
renders a turn as :class:`Frames`: the frames of the whole body, plus ``content_end``, how
many of them carry the turn's content (through its last content delta); the rest is how
the provider says the turn finished (a block's stop, the finish reason, usage, the
terminal event, a ``[DONE]``). The server plays a script's ``ending`` from it
(:func:`ended`): the whole body (``clean``), the content only and a clean end of the body
(``no_finish``: the provider's connection closed without a finish), the content and the
provider's end-of-stream marker without the finish before it (``done_no_finish``: chat's
``data: [DONE]``, Anthropic's ``message_stop``; the body's last frame), or the content with
its last frame cut in half and the connection dropped inside the HTTP body (``cut``).
"""

from __future__ import annotations

from typing import Any

ENDINGS = ("clean", "no_finish", "done_no_finish", "cut")


class Frames(list):
    """A list of frames (bytes, or event objects before they are framed) with
    ``content_end``: the number of frames that carry content (through the last delta)."""

    content_end: int

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.content_end = 0

    def mark(self) -> None:
        """The frames so far carry content: the finish starts after them."""
        self.content_end = len(self)


def ended(frames: list[bytes], content_end: int, ending: str) -> tuple[list[bytes], bool]:
    """The frames a script's ``ending`` writes, and whether the connection is then dropped
    inside the body (``cut``: no clean end of the HTTP body)."""
    if ending == "clean":
        return frames, False
    head = frames[:content_end]
    if ending == "no_finish":
        return head, False
    if ending == "done_no_finish":
        return head + frames[-1:], False
    if ending == "cut":
        if not head:
            return [], True
        last = head[-1]
        return head[:-1] + [last[: max(len(last) // 2, 1)]], True
    raise ValueError(f"unknown ending {ending!r}; known: {', '.join(ENDINGS)}")
