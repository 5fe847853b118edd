"""Responses ``usage``: numeric token counts, and the upstream's counts where the
gateway's are missing or zero (rules ``usage``/``schema_fill`` of
:mod:`wire.responses`; the JSON body repair uses them too)."""

from __future__ import annotations

from typing import Any

from .verdict import Verdict


def as_int(v: Any) -> int | None:
    """A token count as an int: ints as they are, integral floats and digit strings
    converted; anything else (None, bool, text, fractions) is unknown."""
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return int(v)
    if type(v) is str and v.strip().isdigit():
        return int(v)
    return None


def fix_usage(usage: Any, output_tokens: int | None = None) -> tuple[dict[str, Any], bool]:
    """``usage`` with integer input/output/total tokens and integer ``*_details`` values.

    Unknown counts become 0 (never a guess beyond zero), except ``output_tokens`` when the
    caller knows it from elsewhere (``output_tokens``, e.g. the upstream's count); a
    missing ``total_tokens`` is input + output. Existing keys keep their place, missing
    ones are appended.
    """
    if not isinstance(usage, dict):
        usage = {}
    changed = False
    counts = {}
    for key in ("input_tokens", "output_tokens"):
        v = as_int(usage.get(key))
        if v is None and key == "output_tokens" and output_tokens is not None:
            v = output_tokens
        counts[key] = 0 if v is None else v
        if type(usage.get(key)) is not int or usage[key] != counts[key]:
            usage[key] = counts[key]
            changed = True
    total = usage.get("total_tokens")
    v = as_int(total)
    if v is None:
        usage["total_tokens"] = counts["input_tokens"] + counts["output_tokens"]
        changed = True
    elif type(total) is not int:
        usage["total_tokens"] = v
        changed = True
    for key, details in usage.items():
        if not key.endswith("_details") or not isinstance(details, dict):
            continue
        for dk, dv in details.items():
            if type(dv) is int or isinstance(dv, (dict, list)):
                continue
            n = as_int(dv)
            details[dk] = 0 if n is None else n
            changed = True
    return usage, changed


USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "input_tokens_details.cached_tokens": "cached_tokens",
    "output_tokens_details.reasoning_tokens": "reasoning_tokens",
}
"""Responses usage key -> :class:`wire.verdict.UpstreamUsage` attribute."""


def fill_upstream_usage(usage: Any, verdict: Verdict) -> tuple[Any, str | None]:
    """Fill missing or zero counts of a terminal's ``usage`` from the upstream's (the
    verdict's ``upstream_counts``; decide first); returns (usage, note or None)."""
    if verdict.upstream_counts is None:
        return usage, None
    fresh = not isinstance(usage, dict)
    u: dict[str, Any] = {} if fresh else usage
    filled = verdict.fill_usage(u, USAGE_FIELDS, "total_tokens", ("input_tokens", "output_tokens"))
    if not filled:
        return usage, None
    return u, verdict.upstream_counts.note(filled)
