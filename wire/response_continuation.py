"""Rule ``item_order``'s continuations: a message closed early that gets new content.

CPA's Claude path streams a text block after a tool_use into the message it never closed
(same ``item_id``, ``output_index`` 0, ``content_index`` 0, no new ``output_item.added``).
Rule item_order closed that message before the call; its new content opens a new message
item, ``<id>_2`` (``_3``, ... for more), at the next dense index, and every later event for
the original id or raw index is retargeted to it, its late closes made its own. A layer of
:class:`wire.responses.ResponsesRepairer` (:mod:`wire.response_base` lists them); the
rule in full: docs/responses.md.
"""

from __future__ import annotations

from typing import Any

from .response_base import PART_ADDED, TEXT_DELTA, ResponsesCore
from .response_items import Item, Part
from .sse import Event

__all__ = ["Continuations"]


class Continuations(ResponsesCore):
    """Continued messages (the module docstring)."""

    @staticmethod
    def _opens_content(typ: str, obj: dict[str, Any]) -> bool:
        """New content for a message: a content part, or a non-empty text delta (an empty
        one carries nothing and is dropped like any late event)."""
        if typ == PART_ADDED:
            return True
        delta = obj.get("delta")
        return typ == TEXT_DELTA and isinstance(delta, str) and delta != ""

    def _continue(self, ev: Event, obj: dict[str, Any], typ: str, prev: Item) -> tuple[list[bytes], Item]:
        """Rule 2, continuation: content for a message this repairer closed early (CPA's
        Claude path streams a text block after a tool_use into the message it never closed)
        opens a new message item instead of being dropped. It gets the next dense index and
        the id ``<id>_<n>``; the original's id and raw index now lead to it."""
        root = prev.root or prev
        out = self._close_open(ev)  # nothing may be open when an item is added
        root.continuations += 1
        n = root.continuations + 1
        index = len(self.items)
        base = root.id if isinstance(root.id, str) else f"item_{index}"
        cid = f"{base}_{n}"
        while cid in self.items.by_id:
            n += 1
            cid = f"{base}_{n}"
        item = dict(root.item)
        item["id"] = cid
        item["status"] = "in_progress"
        item["content"] = []
        item["role"] = "assistant"
        cont = Item(index, index, item)
        cont.root = root
        self.items.add(cont)
        self.items.by_id[cid] = cont
        if isinstance(root.id, str):
            self.items.by_id[root.id] = cont
        if type(root.raw_index) is int and self.items.by_raw.get(root.raw_index) in (root, prev):
            self.items.by_raw[root.raw_index] = cont
        idx = self._index(cont)
        out.append(self._synth(ev, "response.output_item.added", {"output_index": idx, "item": item}))
        if typ == TEXT_DELTA:
            part: dict[str, Any] = {"type": "output_text", "annotations": [], "text": ""}
            content = (prev.final or {}).get("content")
            if isinstance(content, list) and content and isinstance(content[0], dict):
                part = dict(content[0])  # the shape of the gateway's own parts
                for key in ("annotations", "logprobs"):
                    if key in part:
                        part[key] = []
                part["text"] = ""
            ci = obj.get("content_index")
            cont.ci_map[ci if type(ci) is int else 0] = 0
            cont.parts[0] = Part(part, announced=True)
            out.append(
                self._synth(
                    ev, PART_ADDED, {"item_id": cid, "output_index": idx, "content_index": 0, "part": dict(part)}
                )
            )
        self._note_once("opened a continuation message for content after the item was closed", root)
        return out, cont

    def _retarget(self, obj: dict[str, Any], it: Item) -> bool:
        """An event of a continued message, told about its continuation: ``item_id``,
        ``output_index`` and ``content_index`` (the gateway's part -> the continuation's)."""
        dirty = False
        if obj.get("item_id") != it.id:
            obj["item_id"] = it.id
            dirty = True
        idx = self._index(it)
        if "output_index" in obj and obj["output_index"] != idx:
            obj["output_index"] = idx
            dirty = True
        ci = obj.get("content_index")
        if type(ci) is int:
            mapped = it.ci_map.get(ci)
            if mapped is None:
                mapped = it.ci_map[ci] = len(it.ci_map)
            if mapped != ci:
                obj["content_index"] = mapped
                dirty = True
        if dirty:
            self.fire("item_order")
        return dirty

    def _continuation_done(self, obj: dict[str, Any], item: dict[str, Any], it: Item) -> bool:
        """The gateway's close of a continued message, made the continuation's: its id,
        index and parts, each with the text streamed into it (the gateway's lists the
        whole message's text)."""
        dirty = False
        if item.get("id") != it.id:
            item["id"] = it.id
            dirty = True
        idx = self._index(it)
        if obj.get("output_index") != idx:
            obj["output_index"] = idx
            dirty = True
        given = item.get("content")
        given = given if isinstance(given, list) else []
        back = {mine: theirs for theirs, mine in it.ci_map.items()}
        content = []
        for ci in sorted(it.parts):
            p = it.parts[ci]
            theirs = back.get(ci)
            src = given[theirs] if theirs is not None and 0 <= theirs < len(given) else None
            part = dict(src) if isinstance(src, dict) else dict(p.part)
            part["text"] = p.full_text()
            content.append(part)
        if given != content:
            item["content"] = content
            dirty = True
        if dirty:
            self.fire("item_order")
        return dirty
