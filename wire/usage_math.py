"""Usage that adds up: the arithmetic every API's usage object must satisfy, checked and
(where the one right answer is known) repaired (rule ``usage_math``, contract rule
``usage.sums``).

What is wrong, and what each API says is right:

- **Output without the reasoning tokens while the total counts them** (Responses, chat): the
  output count of OpenAI's APIs includes the reasoning tokens (``output_tokens_details.
  reasoning_tokens`` is a part of ``output_tokens``; chat's ``completion_tokens`` likewise),
  and ``total = input + output``. A gateway that copies Gemini's ``candidatesTokenCount``
  (which excludes thoughts) into ``output_tokens`` while its total is Gemini's
  ``totalTokenCount`` (which includes them) gives ``total == input + output + reasoning``
  with ``reasoning > output`` not rare: the output is then exactly ``output + reasoning``
  (CPA's Gemini translators up to v7.2.140). Repaired only when that equation holds.
- **Cached above input** (Responses, chat: ``cached_tokens`` is a part of the input;
  Gemini: ``cachedContentTokenCount`` a part of ``promptTokenCount``): an input that
  excludes the cached part (Anthropic's own way of counting) under an API that includes it.
  Repaired as ``input += cached`` (and the total, where it was input + output).
- **Negative counts** (every API): 0.

Gemini's own ``usageMetadata`` is right as Gemini defines it (``candidatesTokenCount``
excludes thoughts, ``totalTokenCount`` counts prompt, candidates and thoughts): only its
negative counts and a cached count above the prompt are wrong there. Messages counts
cache reads apart from ``input_tokens``: only negative counts are wrong there.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "problems",
    "repair",
]

_KEYS: Final[dict[str, tuple[str, str, str, str, str]]] = {
    # api -> (input, output, total, cached (dotted), reasoning (dotted))
    "responses": (
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "input_tokens_details.cached_tokens",
        "output_tokens_details.reasoning_tokens",
    ),
    "chat": (
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "prompt_tokens_details.cached_tokens",
        "completion_tokens_details.reasoning_tokens",
    ),
}


def _get(u: dict[str, Any], key: str) -> Any:
    obj: Any = u
    for k in key.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _set(u: dict[str, Any], key: str, v: int) -> None:
    *path, last = key.split(".")
    obj = u
    for k in path:
        obj = obj[k]
    obj[last] = v


def _n(v: Any) -> int | None:
    return v if type(v) is int else None


def _counts(u: dict[str, Any]) -> list[str]:
    """Every integer count of a usage object, dotted (one level of ``*_details``)."""
    out = []
    for k, v in u.items():
        if type(v) is int:
            out.append(k)
        elif isinstance(v, dict):
            out += [f"{k}.{dk}" for dk, dv in v.items() if type(dv) is int]
    return out


def problems(api: str, u: Any) -> list[str]:
    """What does not add up in ``u`` (a usage object of ``api``), as short reasons that name
    fields and numbers, never content."""
    if not isinstance(u, dict):
        return []
    out = [f"{k} is negative ({_get(u, k)})" for k in _counts(u) if _get(u, k) < 0]
    if api == "gemini":
        prompt, cached = _n(u.get("promptTokenCount")), _n(u.get("cachedContentTokenCount"))
        if prompt is not None and cached is not None and cached > prompt >= 0:
            out.append(f"cachedContentTokenCount {cached} above promptTokenCount {prompt}")
        return out
    if api not in _KEYS:
        return out
    ki, ko, kt, kc, kr = _KEYS[api]
    i, o, t, c, r = (_n(_get(u, k)) for k in (ki, ko, kt, kc, kr))
    if i is not None and c is not None and c > i >= 0:
        out.append(f"{kc} {c} above {ki} {i}")
    if o is not None and r is not None and r > 0 and i is not None and t is not None and t == i + o + r:
        out.append(f"{ko} {o} leaves out the {r} reasoning tokens its {kt} {t} counts")
    elif o is not None and r is not None and r > o >= 0:
        out.append(f"{kr} {r} above {ko} {o}")
    return out


def repair(api: str, u: Any) -> list[str]:
    """Make ``u`` add up where the right numbers are known (see the module docstring), in
    place; returns what was changed (for the receipt), ``[]`` when nothing was."""
    if not isinstance(u, dict):
        return []
    changed = []
    for k in _counts(u):
        if _get(u, k) < 0:
            _set(u, k, 0)
            changed.append(f"{k} negative -> 0")
    if api == "gemini":
        prompt, cached = _n(u.get("promptTokenCount")), _n(u.get("cachedContentTokenCount"))
        if prompt is not None and cached is not None and cached > prompt:
            total = _n(u.get("totalTokenCount"))
            u["promptTokenCount"] = prompt + cached
            if total is not None:
                u["totalTokenCount"] = total + cached
            changed.append(f"promptTokenCount {prompt} + cached {cached}")
        return changed
    if api not in _KEYS:
        return changed
    ki, ko, kt, kc, kr = _KEYS[api]
    i, o, t, c, r = (_n(_get(u, k)) for k in (ki, ko, kt, kc, kr))
    if i is not None and c is not None and c > i:
        u[ki] = i + c
        if t is not None and o is not None and t == i + o:
            u[kt] = t = t + c
        changed.append(f"{ki} {i} + cached {c}")
        i += c
    if o is not None and r is not None and r > 0 and i is not None and t is not None and t == i + o + r:
        u[ko] = o + r
        changed.append(f"{ko} {o} + reasoning {r}")
    return changed
