"""Tool-call ids, shared by the chat and messages repairers."""

from __future__ import annotations

from typing import Any


def unique_ids(calls: list[dict[str, Any]], prefix: str) -> bool:
    """Make repeated tool-call ids unique: a repeat becomes ``<prefix><position>`` (the
    first occurrence keeps its id; a suffix avoids clashing with ids already taken).
    CPA's non-stream bodies give every call the same fallback id. Returns whether any
    id changed."""
    taken = {c.get("id") for c in calls if isinstance(c.get("id"), str)}
    seen: set[str] = set()
    changed = False
    for ordinal, c in enumerate(calls):
        id_ = c.get("id")
        if not isinstance(id_, str):
            continue
        if id_ in seen:
            new, k = f"{prefix}{ordinal}", 1
            while new in taken:
                new, k = f"{prefix}{ordinal}_{k}", k + 1
            c["id"] = new
            taken.add(new)
            changed = True
            id_ = new
        seen.add(id_)
    return changed
