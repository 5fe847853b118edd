"""The output items of one Responses stream, as the repairer keeps them.

Bookkeeping only, no rule: :class:`Item` is one announced output item (where it sits,
what was streamed into it, whether it is closed), :class:`Part` one content part of a
message, :class:`Items` all of a stream's items with the ways events name them (the
gateway's ``item_id`` and raw ``output_index``, a done item's other ids). Which events
are rewritten, dropped or inserted is :class:`wire.responses.ResponsesRepairer`'s
business; it reads and updates this state (the split h11 makes between
``_state.py`` and ``_connection.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .stream import Streamed

HEAD = 16
"""Characters of a part's text kept for rule replay's cheap test (:meth:`Part.may_repeat`)."""


class Part:
    """One content part of a message item."""

    __slots__ = ("announced", "chunks", "head", "part", "part_done", "replayed", "size", "text", "text_done")

    def __init__(self, part: dict[str, Any], announced: bool = False) -> None:
        self.part = part
        self.chunks = Streamed()
        self.text: str | None = None  # from output_text.done, if it came
        self.text_done = False
        self.part_done = False
        self.announced = announced  # its content_part.added went out (rule announce)
        self.size = 0  # characters streamed into it (rule replay compares lengths first)
        self.replayed = False  # a full-text replay was dropped (rule replay)
        self.head = ""  # the text's first HEAD characters (rule replay: only a delta that agrees may repeat it)

    def add(self, delta: str) -> None:
        """A text delta streamed into the part."""
        self.chunks.append(delta)
        self.size += len(delta)
        if len(self.head) < HEAD:
            self.head = (self.head + delta)[:HEAD]

    def may_repeat(self, delta: str) -> bool:
        """Rule replay's cheap test: could ``delta`` be a prefix of the text (O(HEAD))?"""
        head = self.head
        return head.startswith(delta) if len(delta) <= len(head) else delta.startswith(head)

    def full_text(self) -> str:
        return self.text if self.text is not None else self.chunks.text()


class Item:
    """One announced output item: where it sits, what was streamed, whether it is closed."""

    __slots__ = (
        "args",
        "args_done",
        "ci_map",
        "continuations",
        "early",
        "final",
        "id",
        "index",
        "item",
        "open",
        "parts",
        "raw_index",
        "root",
        "summary",
        "summary_index",
        "type",
    )

    def __init__(self, index: int, raw_index: Any, item: dict[str, Any]) -> None:
        self.index = index
        self.raw_index = raw_index
        self.id = item.get("id")
        self.type = item.get("type")
        self.item = item
        self.open = True
        self.final: dict[str, Any] | None = None
        self.parts: dict[int, Part] = {}
        args = item.get("arguments")
        self.args = Streamed(args if isinstance(args, str) else "")
        self.args_done = False
        self.summary: dict[int, Streamed] = {}
        self.summary_index = 0
        self.early = False  # closed by this repairer (rule 2), not (yet) by the gateway
        self.root: Item | None = None  # a continuation: the message item it continues
        self.continuations = 0  # a continued message: how many continuations it has
        self.ci_map: dict[int, int] = {}  # a continuation: the gateway's content_index -> its own

    def part(self, content_index: int) -> Part:
        p = self.parts.get(content_index)
        if p is None:
            p = self.parts[content_index] = Part({"type": "output_text", "annotations": [], "text": ""})
        return p

    def arguments(self) -> str:
        return self.args.text()

    def close(self, final: dict[str, Any]) -> None:
        """Closed: keep the item as closed, drop what was streamed (not needed any more)."""
        self.open = False
        self.final = final
        self.parts = {}
        self.args = Streamed()
        self.summary = {}

    def snapshot(self) -> dict[str, Any]:
        """The item as closed (or as announced, if it never was)."""
        if self.final is not None:
            return self.final
        return dict(self.item)


class Items:
    """A stream's items in announcement order (``index`` is the dense position), and
    the maps events are resolved through."""

    __slots__ = ("_all", "aliases", "by_id", "by_raw")

    def __init__(self) -> None:
        self._all: list[Item] = []
        self.by_id: dict[str, Item] = {}
        """``item_id`` -> item (a continuation also takes its root's id)."""
        self.by_raw: dict[Any, Item] = {}
        """The gateway's ``output_index`` -> item."""
        self.aliases: dict[str, Item] = {}
        """Rule item_id: a done item's other id -> the item."""

    def __iter__(self) -> Iterator[Item]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def add(self, it: Item) -> None:
        """``it`` was announced (its ``index`` is :func:`len` of this before the call)."""
        self._all.append(it)

    def lookup(self, obj: dict[str, Any], item_id: Any = None) -> Item | None:
        """The item an event names: by its ``item_id`` (or ``item_id`` given), else by its
        raw ``output_index``; None if neither is known."""
        if item_id is None:
            item_id = obj.get("item_id")
        if isinstance(item_id, str):
            it = self.by_id.get(item_id)
            if it is not None:
                return it
        raw = obj.get("output_index")
        if type(raw) is int:
            return self.by_raw.get(raw)
        return None

    def finals(self) -> list[dict[str, Any]]:
        """The closed items as they were closed, in order (a failure terminal's output)."""
        return [it.final for it in self._all if it.final is not None]
