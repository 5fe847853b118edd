"""The Responses repairer's terminals: how a stream ends, as the client must hear it.

A success terminal (``response.completed``/``.incomplete``) gets its ``output`` listing the
announced items in order, as closed (rules terminal_output, status, item_id,
reasoning_summary), whole integer usage that adds up (rules usage, usage_math; the
upstream's counts where the gateway's are missing), and becomes ``response.failed`` when
the gateway hid a failure (rule hidden_failure) or the provider's call failed (rule
upstream_failure), ``response.incomplete`` on a truncation verdict;
``response.failed``/``error`` pass numbered with the stream's id, nothing synthesized; a
stream that stops without a terminal ends with ``response.failed`` (rule eof_terminal),
never a success. The response id stays the first lifecycle event's (rule response_id). A
layer of :class:`wire.responses.ResponsesRepairer` (:mod:`wire.response_base` lists them);
the rules in full: docs/responses.md.
"""

from __future__ import annotations

from typing import Any

from . import stops, usage_math
from .hidden import COMPLETED_WITHOUT_USAGE, failed_response, synthetic_completion
from .response_base import NATIVE, SUCCESS_TERMINAL
from .response_items import Item
from .response_skim import FastPath
from .response_usage import as_int, fill_upstream_usage, fix_usage
from .sse import Event
from .upstream_terminal import responses_failed

__all__ = ["Terminals"]


class Terminals(FastPath):
    """How a stream ends (the module docstring)."""

    def _eof_failure(self, ev: Event) -> bytes:
        """Rule eof_terminal: the gateway's stream stopped without a terminal event; the
        client gets ``response.failed`` (same response id, the next ``sequence_number``),
        never a success. Open items stay open (no done event: a call the gateway never
        closed is not run); the failure's ``output`` lists every announced item (rule
        terminal_output), an open one as ``incomplete`` with what was streamed into it."""
        self._finished = True
        if self._last_seq is None:
            self._last_seq = -1  # clients require sequence_number on response.failed
        resp = {
            "id": self._response_id,
            "object": "response",
            "created_at": self._created_at if self._created_at is not None else self.ctx.started_at,
            "status": "failed",
            "error": {"code": "server_error", "message": "The upstream stream ended without a terminal event."},
            "incomplete_details": None,
            "model": self._model or self.ctx.model,
            "output": self._failure_output(),
            "usage": None,
        }
        self.note("stream ended without a terminal event: ended it with response.failed")
        return self._synth(ev, "response.failed", {"response": resp}, "eof_terminal")

    def _failure_output(self) -> list[dict[str, Any]]:
        """A synthesized failure's ``output``: every announced item, as closed, or (still
        open) as streamed so far with ``status: "incomplete"``; rule terminal_output off:
        the closed ones only."""
        if not self.rules.terminal_output:
            return self.items.finals()
        out: list[dict[str, Any]] = []
        for it in self.items:
            if it.final is not None:
                out.append(it.final)
                continue
            item = dict(it.item)
            if it.type == "message":
                content = []
                for ci in sorted(it.parts):
                    part = dict(it.parts[ci].part)
                    if part.get("type") == "output_text":
                        part["text"] = it.parts[ci].full_text()
                    content.append(part)
                item["content"] = content
            elif it.type == "function_call":
                item["arguments"] = it.arguments()
            elif it.type == "reasoning" and it.summary:
                item["summary"] = self._summary(it)
            item["status"] = "incomplete"
            out.append(item)
        if len(out) > len(self.items.finals()):
            self.fired["terminal_output"] += 1  # the failure event lists what only it lists
        return out

    def _summaries(self, output: list[Any]) -> bool:
        """Rule reasoning_summary on a terminal's ``output``: a reasoning entry without a
        summary list gets its item's, as closed (else ``[]``)."""
        dirty = False
        for e in output:
            if isinstance(e, dict) and e.get("type") == "reasoning" and not isinstance(e.get("summary"), list):
                it = self.items.by_id.get(e["id"]) if isinstance(e.get("id"), str) else None
                final = it.final.get("summary") if it is not None and it.final is not None else None
                e["summary"] = list(final) if isinstance(final, list) else []
                dirty = True
                self.fire("reasoning_summary")
        return dirty

    def _alias_pos(self, it: Item, given: list[Any], by_id: dict[str, int], used: set[int]) -> int | None:
        """Rule item_id at the terminal: where an item whose ids rotated sits in the
        gateway's ``output`` (under an id its done event carried, else the first unused
        entry of its type that names no announced item)."""
        for alias, owner in self.items.aliases.items():
            if owner is it and alias in by_id and by_id[alias] not in used:
                return by_id[alias]
        for pos, e in enumerate(given):
            if pos in used or not isinstance(e, dict) or e.get("type") != it.type:
                continue
            eid = e.get("id")
            if not (isinstance(eid, str) and eid in self.items.by_id):
                return pos
        return None

    # --- lifecycle ----------------------------------------------------------------------
    def _response_identity(self, resp: dict[str, Any]) -> bool:
        """Rule 7 (and the id fill of rule 8): the first lifecycle id, kept."""
        rid = resp.get("id")
        if self._response_id is None:
            if isinstance(rid, str):
                self._response_id = rid
            return False
        if rid == self._response_id:
            return False
        if (self.rules.response_id and isinstance(rid, str)) or (self.rules.schema_fill and rid is None):
            resp["id"] = self._response_id
            self.fire("response_id" if isinstance(rid, str) else "schema_fill")
            return True
        return False

    def _terminal(self, ev: Event, obj: dict[str, Any], typ: str) -> list[bytes]:
        out = self._close_open(ev) if self.rules.item_order else []
        self._finished = True
        resp = obj.get("response")
        if not isinstance(resp, dict):
            self.note(f"{typ} without a response object, passed through")
            self.decision = self.verdict.decide()
            return out + [self._out(ev, obj, False)]
        if typ == "response.completed" and self.rules.hidden_failure and not self._upstream_says_failed():
            ids = [it.id for it in self.items if it.type in ("message", "reasoning")]
            if synthetic_completion(resp, ids):
                return out + [self._hidden_failure(ev, obj, resp)]
        dirty = self._round_rules(resp, typ)
        dirty |= self._response_identity(resp)
        usage = resp.get("usage")
        if isinstance(usage, dict):
            self.verdict.usage(as_int(usage.get("output_tokens")))
        dirty |= self._terminal_output(resp)
        details = resp.get("incomplete_details")
        if typ == "response.incomplete" or isinstance(details, dict):
            reason = details.get("reason") if isinstance(details, dict) else None
            self.verdict.native(NATIVE.get(reason, "unknown"), f"{typ}, incomplete_details.reason {reason!r}")
        # ``incomplete_details: null`` is no evidence: CPA's templates write it unconditionally
        self.decision = d = self.verdict.decide()
        if self.rules.usage:
            usage, filled = fill_upstream_usage(usage, self.verdict)
            if filled:
                self.note(filled)
            usage, changed = fix_usage(usage, self._upstream_output_tokens(usage))
            changed |= bool(filled)
            if changed:
                resp["usage"] = usage
                dirty = True
                self.fire("usage")
        rename = None
        if d.failed and not d.native and self.rules.upstream_failure and typ in SUCCESS_TERMINAL:
            # the upstream leg: the provider's call failed, so the client hears its API's failure
            obj["type"] = rename = "response.failed"
            responses_failed(resp, d.evidence[0].detail if d.evidence else "failed")
            dirty = True
            self.fire("upstream_failure")
            self.note(f"terminal rewritten to response.failed ({d.evidence[0].detail if d.evidence else 'upstream'})")
        reason = d.word("responses")
        if (
            typ == "response.completed"
            and reason is not None
            and not d.native
            and self.rules.truncation == "incomplete"
        ):
            obj["type"] = rename = "response.incomplete"
            resp["status"] = "incomplete"
            resp["incomplete_details"] = {"reason": reason}
            dirty = True
            self.fire("truncation")
            self.note(f"terminal rewritten to response.incomplete ({d.outcome})")
        out.append(self._out(ev, obj, dirty, event=rename if ev.event is not None else None))
        return out

    def _upstream_says_failed(self) -> bool:
        """The upstream leg's call failed (rule upstream_failure): the terminal becomes
        ``response.failed`` with the provider's evidence below, not rule hidden_failure's."""
        return self.rules.upstream_failure and self.verdict.upstream_failed()

    def _hidden_failure(self, ev: Event, obj: dict[str, Any], resp: dict[str, Any]) -> bytes:
        """Rule hidden_failure (:mod:`wire.hidden`): CPA's Gemini-family translator ended a
        stream whose provider body never finished with ``response.completed`` without
        usage; the client gets it as ``response.failed`` (same id and number, its output as
        the gateway listed it, no verdict: a failure is not a truncation)."""
        self._response_identity(resp)
        self._terminal_output(resp)
        failed_response(resp)
        obj["type"] = "response.failed"
        self.fire("hidden_failure")
        self.note(f"{COMPLETED_WITHOUT_USAGE}: ended it as response.failed")
        return self._out(ev, obj, True, event="response.failed" if ev.event is not None else None)

    def _round_rules(self, resp: dict[str, Any], typ: str) -> bool:
        """Rules usage_math and finish_reason on a success terminal's response object, before
        the verdict reads it: usage that does not add up, and an incomplete reason from
        another API's vocabulary."""
        dirty = False
        if self.rules.usage_math:
            fixed = usage_math.repair("responses", resp.get("usage"))
            if fixed:
                dirty = True
                self.fire("usage_math")
                self.note(f"usage made to add up: {'; '.join(fixed)}")
        details = resp.get("incomplete_details")
        if self.rules.finish_reason and typ == "response.incomplete" and isinstance(details, dict):
            reason = details.get("reason")
            new = stops.foreign("responses", reason)
            if new is not None:
                details["reason"] = new
                dirty = True
                self.fire("finish_reason")
                self.note(f"incomplete_details.reason {reason!r} (not a Responses reason) written as {new!r}")
        return dirty

    def _upstream_output_tokens(self, usage: Any) -> int | None:
        """The upstream's output token count, when the client leg's usage has none (the
        verdict's correlated Devin usage): known, so it fills instead of a zero."""
        if isinstance(usage, dict) and as_int(usage.get("output_tokens")) is not None:
            return None
        tokens, where = self.verdict.output_tokens_best
        if where != "upstream":
            return None
        self.note(f"usage.output_tokens filled from the upstream's count ({tokens})")
        return tokens

    def _terminal_output(self, resp: dict[str, Any]) -> bool:
        """Rules 1 and 5 on ``response.output``."""
        given = resp.get("output")
        dirty = False
        if isinstance(given, list) and self.rules.reasoning_summary:
            dirty = self._summaries(given)
        if not isinstance(given, list):
            if not self.rules.terminal_output:
                return False
            given = []  # also a turn with no item at all (CPA's Claude and Gemini paths): output []
            dirty = True
            self.fire("terminal_output")
        if self.rules.status:
            for e in given:
                if isinstance(e, dict) and e.get("type") == "function_call" and "status" not in e:
                    e["status"] = "completed"
                    dirty = True
                    self.fire("status")
        if not self.rules.terminal_output:
            return dirty
        by_id: dict[str, int] = {}
        by_call: dict[str, int] = {}
        for k, e in enumerate(given):
            if isinstance(e, dict):
                if isinstance(e.get("id"), str):
                    by_id.setdefault(e["id"], k)
                if e.get("type") == "function_call" and isinstance(e.get("call_id"), str):
                    by_call.setdefault(e["call_id"], k)
        used: set[int] = set()
        want: list[Any] = []
        if self._unannounced:
            self.note("terminal output left in the gateway's order: items were never announced")
            return dirty
        for it in self.items:
            pos = by_id.get(it.id) if isinstance(it.id, str) else None
            if pos is None and self.rules.item_id and it.index in self._rotated:
                pos = self._alias_pos(it, given, by_id, used)
                if pos is not None and isinstance(given[pos], dict) and given[pos].get("id") != it.id:
                    given[pos] = {**given[pos], "id": it.id}
                    dirty = True
                    self.fire("item_id")
            if it.continuations or it.index in self._replayed:
                # the gateway lists a continued message with the text of all its
                # continuations: each part stands for itself, as it was closed
                if pos is not None:
                    used.add(pos)
                want.append(it.snapshot())
                continue
            if (pos is None or pos in used) and it.type == "function_call":
                cid = it.item.get("call_id")
                pos = by_call.get(cid) if isinstance(cid, str) else None
            if pos is not None and pos not in used:
                used.add(pos)
                want.append(given[pos])
            else:
                snap = it.snapshot()
                if it.type == "function_call" and self.rules.status and "status" not in snap:
                    snap = dict(snap)
                    snap["status"] = "completed"
                    self.fire("status")
                want.append(snap)
        extra = [e for pos, e in enumerate(given) if pos not in used]
        if extra:
            self.note(f"terminal output lists {len(extra)} item(s) never announced; kept at the end")
            want += extra
        if want != given or dirty:
            if want != given:
                self.fire("terminal_output")
            resp["output"] = want
            return True
        return False

    def _failure(self, ev: Event, obj: dict[str, Any], typ: str) -> bytes:
        """``response.failed`` / ``error``: pass (numbered, id kept); nothing synthesized."""
        self._finished = True
        dirty = False
        if self.rules.schema_fill and type(obj.get("sequence_number")) is not int and self._last_seq is not None:
            obj["sequence_number"] = self._last_seq + 1
            dirty = True
            self.fire("schema_fill")
        resp = obj.get("response")
        if typ == "response.failed" and isinstance(resp, dict):
            dirty |= self._response_identity(resp)
            if self.rules.usage and isinstance(resp.get("usage"), dict):
                _usage, changed = fix_usage(resp["usage"])
                dirty |= changed
                if changed:
                    self.fire("usage")
        return self._out(ev, obj, dirty)
