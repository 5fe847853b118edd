"""Non-streaming ``/v1/responses`` bodies: the stream's rules on the response object.

A JSON body carries no announcement order to compare with, so the output keeps the
gateway's order; the fields clients require are filled in, usage made whole and a
truncation verdict turns the body ``incomplete``, as on a stream (docs/responses.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from . import stops, usage_math
from .response_base import NATIVE
from .response_usage import as_int, fill_upstream_usage, fix_usage
from .rules import FlowContext, Rules
from .verdict import Decision, Verdict

__all__ = ["repair_responses_body", "repair_responses_json"]


def _repair_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> tuple[bool, Decision | None]:
    if verdict.cap is None and ctx.request:
        verdict.request(ctx.request)
    changed = False
    hit: set[str] = set()  # the rules that changed the body (counted once each in fired)
    if rules.schema_fill:
        # the AI SDK's response schema needs both (its generateText builds a Date from
        # created_at: "Invalid time value" without it); unfixed CPA sends neither
        created_at = obj.get("created_at")
        if not isinstance(created_at, (int, float)) or isinstance(created_at, bool):
            obj["created_at"] = ctx.started_at
            changed = True
            hit.add("schema_fill")
        if not isinstance(obj.get("model"), str) and ctx.model:
            obj["model"] = ctx.model
            changed = True
            hit.add("schema_fill")
    output = obj.get("output")
    if isinstance(output, list):
        for i, item in enumerate(output):
            if not isinstance(item, dict):
                continue
            typ = item.get("type")
            if rules.schema_fill and not isinstance(item.get("id"), str):
                fill = item.get("call_id") if typ == "function_call" else f"item_{i}"
                if typ in ("function_call", "message", "reasoning") and isinstance(fill, str):
                    item["id"] = fill
                    changed = True
                    hit.add("schema_fill")
            if typ == "function_call":
                if rules.status and "status" not in item:
                    item["status"] = "completed"
                    changed = True
                    hit.add("status")
                if isinstance(item.get("arguments"), str):
                    verdict.observe_args(item["arguments"])
                    verdict.tool_args(item["arguments"], item.get("name"))
            elif typ == "reasoning" and rules.reasoning_summary and not isinstance(item.get("summary"), list):
                item["summary"] = []  # codex-acp #266, as on the stream's items
                changed = True
                hit.add("reasoning_summary")
            elif typ == "message" and isinstance(item.get("content"), list):
                for part in item["content"]:
                    if not isinstance(part, dict) or part.get("type") != "output_text":
                        continue
                    if isinstance(part.get("text"), str):
                        verdict.observe_text(part["text"])  # the digest the upstream leg matches
                    if rules.schema_fill and "annotations" not in part:
                        part["annotations"] = []
                        changed = True
                        hit.add("schema_fill")
    if rules.terminal_output and obj.get("object") == "response" and not isinstance(output, list):
        obj["output"] = []  # a response with no item at all
        changed = True
        hit.add("terminal_output")
    if rules.usage_math and usage_math.repair("responses", obj.get("usage")):
        changed = True
        hit.add("usage_math")
    usage = obj.get("usage")
    if isinstance(usage, dict):
        verdict.usage(as_int(usage.get("output_tokens")))
    details = obj.get("incomplete_details")
    if rules.finish_reason and obj.get("status") == "incomplete" and isinstance(details, dict):
        new = stops.foreign("responses", details.get("reason"))
        if new is not None:
            details["reason"] = new
            changed = True
            hit.add("finish_reason")
    if obj.get("status") == "incomplete" or isinstance(details, dict):
        reason = details.get("reason") if isinstance(details, dict) else None
        verdict.native(NATIVE.get(reason, "unknown"), f"status {obj.get('status')!r}, reason {reason!r}")
    failed = obj.get("status") == "failed" or bool(obj.get("error"))
    d = None if failed else verdict.decide()
    if rules.usage:
        usage, filled = fill_upstream_usage(usage, verdict)
        if filled:
            obj["usage"] = usage
            changed = True
            hit.add("usage")
        known = None
        if not (isinstance(usage, dict) and as_int(usage.get("output_tokens")) is not None):
            tokens, where = verdict.output_tokens_best
            known = tokens if where == "upstream" else None
        usage, fixed = fix_usage(usage, known)
        if fixed:
            obj["usage"] = usage
            changed = True
            hit.add("usage")
    reason = d.word("responses") if d is not None else None
    if d is not None and reason is not None and not d.native and rules.truncation == "incomplete":
        obj["status"] = "incomplete"
        obj["incomplete_details"] = {"reason": reason}
        changed = True
        hit.add("truncation")
    if fired is not None:
        for rule in hit:
            fired[rule] += 1
    return changed, d


def repair_responses_json(
    obj: dict[str, Any], rules: Rules, ctx: FlowContext, verdict: Verdict, fired: Counter[str] | None = None
) -> bool:
    """Repair a non-streaming ``/v1/responses`` body in place; True if anything changed.

    ``created_at`` (the request's time) and ``model`` (the request's) when missing;
    function_call output items get ``status: "completed"`` and ``id`` (= ``call_id``) when
    missing; message/reasoning items an ``id`` (``item_<position>``, CPA's own scheme) and
    ``output_text`` parts ``annotations: []`` (both required by the AI SDK's response
    schema); ``usage`` as in the stream; a truncation verdict sets ``status: "incomplete"``
    and ``incomplete_details``. The output order is left as sent: a JSON body carries no
    announcement order to compare with. ``fired`` (if given) counts each rule that
    changed the body once.
    """
    return _repair_json(obj, rules, ctx, verdict, fired)[0]


def repair_responses_body(
    body: bytes, rules: Rules, ctx: FlowContext, verdict: Verdict
) -> tuple[bytes, Decision | None]:
    """:func:`repair_responses_json` on raw bytes: the body itself if it is not a JSON
    object or needs no change (byte-identical), else the repaired JSON."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body, None
    if not isinstance(obj, dict):
        return body, None
    changed, decision = _repair_json(obj, rules, ctx, verdict)
    return (orjson.dumps(obj) if changed else body), decision
