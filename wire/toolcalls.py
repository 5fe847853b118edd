"""Tool calls: ids (the chat and messages repairers), and what makes a turn's calls whole
(rule tool_finish: the chat repairer and the contract)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


def whole_calls(args: Iterable[str]) -> bool:
    """One call or more, each one's arguments a JSON object."""
    n = 0
    for a in args:
        n += 1
        try:
            if not isinstance(orjson.loads(a), dict):
                return False
        except orjson.JSONDecodeError:
            return False
    return n > 0


def forced_call(request: Any) -> bool:
    """The client named the function to call (``tool_choice`` an object): OpenAI itself
    then finishes ``stop``, and such a stream is correct as it came."""
    return isinstance(request, dict) and isinstance(request.get("tool_choice"), dict)


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
