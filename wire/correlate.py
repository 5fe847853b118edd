"""Which upstream (Devin) flow served which client flow? (sans-IO)

Nothing on the wire links the two legs (CPA invents new ids on each side); two facts do.
Content: the client receives exactly the text and arguments the upstream generated, so
the client flow's :meth:`wire.verdict.Verdict.digest` equals the upstream flow's
:meth:`wire.devin.DevinTap.digest`. Causality: the upstream record is finished before the
client's terminal event arrives. :class:`Correlator` keeps the finished, unclaimed
records; :meth:`Correlator.resolve` claims the one with the client's digest and reports
its StopReason to the verdict (:class:`Resolver` waits while the linked call is open).
Bounded: records expire and their number is capped. In detail, with the ambiguous cases:
docs/upstream-leg.md ("The matching in detail").
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .devin import RequestInfo, TapResult
from .upstream_call import CallResult

__all__ = [
    "Correlator",
    "PendingRequest",
    "Resolver",
    "UpstreamRecord",
    "choose_claim",
    "choose_linked",
    "choose_pending",
    "choose_record",
    "client_cap",
    "client_needles",
    "is_open_link",
]

MAX_NEEDLES = 8
"""How many of the client's last user/tool texts are kept to match a request by."""
MIN_NEEDLE = 1
"""Needles shorter than this (after trimming) are ignored."""
_CAP_FIELDS = ("max_output_tokens", "max_completion_tokens", "max_tokens")

Digest = tuple[str, int, str, int]


@dataclass(slots=True)
class UpstreamRecord:
    """One upstream GetChatMessage flow."""

    flow_id: str
    started: float
    client_flow_id: str | None = None
    """The client flow the request side linked it to, if any."""
    max_tokens_sent: int | None = None
    """Field 8.2 as it left the sidecar (after a patch)."""
    max_tokens_original: int | None = None
    """Field 8.2 as the gateway wrote it, when the sidecar patched it."""
    finished: float | None = None
    result: TapResult | CallResult | None = None
    """What the call said (Devin's :class:`wire.devin.TapResult`, any other provider's
    :class:`wire.upstream_call.CallResult`); set at its decisive event, and replaced by the
    final one at the end of its body while no client flow has claimed it."""
    provider: str = "devin"
    claimed_by: str | None = None
    """The client flow id (or ``"?"``) that claimed it."""
    link_ambiguous: bool = False
    """Another pending client request matched the request equally well."""
    by_link: bool = False
    """Claimed through the request-side link, not by content digest."""

    @property
    def digest(self) -> Digest | None:
        return self.result.digest if self.result is not None else None


@dataclass(slots=True)
class PendingRequest:
    """A client request seen on the client leg, waiting for the upstream request it causes."""

    flow_id: str
    path: str
    cap: int | None
    cap_field: str | None
    needles: tuple[str, ...]
    noted: float
    upstream_flow_ids: list[str] = field(default_factory=list)
    last_match_ambiguous: bool = False
    """The last upstream request matched to it matched another pending request as well."""


def client_cap(body: dict[str, Any]) -> tuple[int | None, str | None]:
    """The output cap a client asked for: (value, field name) or (None, None)."""
    for name in _CAP_FIELDS:
        v = body.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, name
    return None, None


def _texts(content: Any) -> list[str]:
    """Text of a message content in any of the three APIs' spellings."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                t = part.get("type")
                if t in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif t == "tool_result":  # /v1/messages: a tool result inside a user message
                    out += _texts(part.get("content"))
    return out


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def client_needles(path: str, body: dict[str, Any]) -> tuple[str, ...]:
    """The texts of the client's user messages and tool results, in order (last
    :data:`MAX_NEEDLES`), from a ``/v1/responses``, chat or messages request body."""
    out: list[str] = []
    if "/responses" in path:
        inp = body.get("input")
        if isinstance(inp, str):
            out.append(inp)
        elif isinstance(inp, list):
            for item in inp:
                if not isinstance(item, dict):
                    continue
                t = item.get("type")
                if t in (None, "message") and item.get("role") == "user":
                    out += _texts(item.get("content"))
                elif t in ("function_call_output", "custom_tool_call_output"):
                    out += _texts(item.get("output"))
    elif isinstance(body.get("contents"), list):  # Gemini: contents[].parts[] of the user's turns
        for c in body["contents"]:
            if isinstance(c, dict) and c.get("role", "user") in ("user", "function", "tool"):
                for part in c.get("parts") or ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        out.append(part["text"])
                    elif isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                        out += [v for v in _strings(part["functionResponse"].get("response"))]
    else:  # chat completions and messages share the messages[] shape
        msgs = body.get("messages")
        if isinstance(msgs, list):
            for m in msgs:
                if isinstance(m, dict) and m.get("role") in ("user", "tool"):
                    out += _texts(m.get("content"))
    needles = [s.strip() for s in out]
    return tuple(n for n in needles if len(n) >= MIN_NEEDLE)[-MAX_NEEDLES:]


# --- the matching rules, as pure functions (Correlator and addons/sharedstate.py's
# SharedCorrelator, whose records and pending requests live in Redis, apply the same ones)


def choose_pending(pending: Iterable[PendingRequest], contents: Sequence[str]) -> tuple[PendingRequest | None, bool]:
    """The pending client request an upstream request with these prompt contents was
    caused by (its last needle in one of them; then most needles found, not matched
    before, oldest), and whether another one matched equally well."""
    best: tuple[int, int, float] | None = None
    chosen: PendingRequest | None = None
    keys: list[tuple[int, int]] = []
    for p in pending:
        if not any(p.needles[-1] in c for c in contents):
            continue
        found = sum(1 for n in p.needles if any(n in c for c in contents))
        key = (found, 0 if p.upstream_flow_ids else 1, -p.noted)
        keys.append(key[:2])
        if best is None or key > best:
            best, chosen = key, p
    if chosen is None or best is None:
        return None, False
    return chosen, keys.count(best[:2]) > 1


def choose_record(
    records: Iterable[UpstreamRecord], digest: Digest, client_flow_id: str | None
) -> tuple[UpstreamRecord | None, int]:
    """Among the records with this digest, the finished, unclaimed one a client flow
    claims (linked to it, then unlinked, then linked to another; oldest finished first;
    an empty output only through its link), and how many could have been."""
    empty = digest[1] == 0 and digest[3] == 0
    best: tuple[int, float] | None = None
    chosen: UpstreamRecord | None = None
    n = 0
    for rec in records:
        if rec.claimed_by is not None or rec.finished is None or rec.digest != digest:
            continue  # (a shared store's digest index may still list a record whose result was replaced)
        if rec.client_flow_id is None:
            rank = 1
        elif client_flow_id is not None and rec.client_flow_id == client_flow_id:
            rank = 2
        else:
            rank = 0  # linked to another client flow: only if nothing else fits
        if empty and rank != 2:
            continue
        n += 1
        key = (rank, -rec.finished)
        if best is None or key > best:
            best, chosen = key, rec
    return chosen, n


def choose_linked(records: Iterable[UpstreamRecord], client_flow_id: str) -> UpstreamRecord | None:
    """The finished, unclaimed record the request side linked to this client flow
    unambiguously (the latest finished, if CPA retried): see :func:`choose_claim`."""
    chosen: UpstreamRecord | None = None
    for rec in records:
        if (
            rec.client_flow_id == client_flow_id
            and not rec.link_ambiguous
            and rec.claimed_by is None
            and rec.finished is not None
            and (chosen is None or rec.finished >= chosen.finished)  # type: ignore[operator]
        ):
            chosen = rec
    return chosen


def choose_claim(
    by_digest: Iterable[UpstreamRecord], linked: Iterable[UpstreamRecord], digest: Digest, client_flow_id: str | None
) -> tuple[UpstreamRecord | None, int, bool]:
    """The record a client flow claims: (record, how many had its digest, found by link).

    By digest first (:func:`choose_record`); a record the request side linked to *another*
    client flow is taken only when this flow has no finished, unambiguous link of its own
    (:func:`choose_linked`): two conversations with the same output must each get their
    own call, even where the gateway garbled this one's content (its digest then differs
    from its call's)."""
    chosen, n = choose_record(by_digest, digest, client_flow_id)
    if client_flow_id is None:
        return chosen, n, False
    if chosen is not None and (chosen.client_flow_id is None or chosen.client_flow_id == client_flow_id):
        return chosen, n, False
    own = choose_linked(linked, client_flow_id)
    if own is not None:
        return own, n, True
    return chosen, n, False


def is_open_link(rec: UpstreamRecord, client_flow_id: str) -> bool:
    """An upstream call linked to this client flow, started, its end not read, unclaimed."""
    return rec.client_flow_id == client_flow_id and rec.finished is None and rec.claimed_by is None


class Resolver:
    """The callable for :attr:`wire.verdict.Verdict.resolver`; remembers what it found.

    While an upstream call the request side linked to this client flow is still open
    (its end-of-stream envelope not read yet), it claims nothing and puts itself back as
    ``verdict.resolver`` (at most :data:`RETRIES` times), so that the next ``decide()``
    looks again: a gateway that writes the client's terminal event before it has read
    the upstream's trailer (CPA PR #5111's Devin executor writes the finish chunk on the
    StopReason frame, before the usage frame and the trailer) is still matched, by a
    repairer that holds its terminal until the next event while :attr:`waiting`.
    """

    __slots__ = ("client_flow_id", "correlator", "record", "tries", "waiting")

    RETRIES = 3

    def __init__(self, correlator: Correlator, client_flow_id: str | None) -> None:
        self.correlator = correlator
        self.client_flow_id = client_flow_id
        self.record: UpstreamRecord | None = None
        self.waiting = False
        """Nothing found yet, but a linked upstream call is still open."""
        self.tries = 0

    def __call__(self, verdict: Any) -> None:
        self.tries += 1
        last = self.tries > self.RETRIES
        self.record = self.correlator.resolve(verdict, self.client_flow_id, final=last)
        self.waiting = self.record is None and not last and self.correlator.awaiting(self.client_flow_id)
        if self.waiting and getattr(verdict, "resolver", None) is None:
            verdict.resolver = self


class Correlator:
    """Shared by the two legs of one sidecar process; see the module docstring."""

    def __init__(
        self,
        *,
        ttl_finished: float = 300.0,
        ttl_open: float = 3600.0,
        ttl_pending: float = 900.0,
        max_records: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_finished = ttl_finished
        self.ttl_open = ttl_open
        self.ttl_pending = ttl_pending
        self.max_records = max_records
        self.clock = clock
        self.records: OrderedDict[str, UpstreamRecord] = OrderedDict()
        self._by_digest: dict[Digest, list[str]] = {}
        self.pending: OrderedDict[str, PendingRequest] = OrderedDict()
        self._swept = clock()
        self.stats = {"resolved": 0, "unresolved": 0, "ties": 0, "by_link": 0, "requests_matched": 0, "expired": 0}

    # --- request side --------------------------------------------------------------
    def note_client_request(self, flow_id: str, path: str, body: Any) -> PendingRequest | None:
        """A client request on the client leg (before it is forwarded to the gateway)."""
        if not isinstance(body, dict):
            return None
        needles = client_needles(path, body)
        if not needles:
            return None
        self._sweep()
        cap, cap_field = client_cap(body)
        p = PendingRequest(flow_id, path, cap, cap_field, needles, self.clock())
        self.pending[flow_id] = p
        self.pending.move_to_end(flow_id)
        while len(self.pending) > self.max_records:
            self.pending.popitem(last=False)
        return p

    def forget_client(self, flow_id: str) -> None:
        """The client flow is over: its pending request can go."""
        self.pending.pop(flow_id, None)

    def match_request(self, upstream_flow_id: str, info: RequestInfo | Any) -> PendingRequest | None:
        """The pending client request that caused this upstream request, or None."""
        contents = [text for _, text in info.prompts if text]
        if not contents or not self.pending:
            return None
        chosen, ambiguous = choose_pending(self.pending.values(), contents)
        if chosen is not None:
            chosen.upstream_flow_ids.append(upstream_flow_id)
            chosen.last_match_ambiguous = ambiguous
            self.stats["requests_matched"] += 1
        return chosen

    # --- response side -------------------------------------------------------------
    def upstream_started(
        self,
        flow_id: str,
        client_flow_id: str | None = None,
        max_tokens_sent: int | None = None,
        max_tokens_original: int | None = None,
        link_ambiguous: bool = False,
        provider: str = "devin",
    ) -> UpstreamRecord:
        self._sweep()
        rec = UpstreamRecord(flow_id, self.clock(), client_flow_id, max_tokens_sent, max_tokens_original,
                             link_ambiguous=link_ambiguous, provider=provider)  # fmt: skip
        self.records[flow_id] = rec
        while len(self.records) > self.max_records:
            _, old = self.records.popitem(last=False)
            self._unindex(old)
            self.stats["expired"] += 1
        return rec

    def upstream_finished(self, flow_id: str, result: TapResult | CallResult) -> UpstreamRecord | None:
        """The upstream's end-of-stream envelope was read (or its body ended); for another
        provider, its decisive event passed. A second call (the body's end after the
        decisive event) replaces the result while no client flow has claimed the record."""
        rec = self.records.get(flow_id)
        if rec is None:
            return rec
        if rec.finished is not None:
            if rec.claimed_by is None and rec.result is not None and rec.result != result:
                self._unindex(rec)
                rec.result = result
                self._by_digest.setdefault(result.digest, []).append(flow_id)
            return rec
        rec.finished = self.clock()
        rec.result = result
        self._by_digest.setdefault(result.digest, []).append(flow_id)
        return rec

    def upstream_dropped(self, flow_id: str) -> None:
        """The upstream flow will never finish usefully (not a Connect stream, HTTP error)."""
        rec = self.records.pop(flow_id, None)
        if rec is not None:
            self._unindex(rec)

    def claim(self, digest: Digest, client_flow_id: str | None = None) -> UpstreamRecord | None:
        """Take the finished, unclaimed record for this client flow (:func:`choose_claim`;
        the module docstring). O(records with the digest), O(records) when it looks for
        the flow's own link."""
        ids = self._by_digest.get(digest)
        found = [r for r in (self.records.get(fid) for fid in ids or ()) if r is not None]
        chosen, n, by_link = choose_claim(found, self.records.values(), digest, client_flow_id)
        if chosen is None:
            return None
        if n > 1 and not by_link:
            self.stats["ties"] += 1
        chosen.claimed_by = client_flow_id or "?"
        if by_link:
            chosen.by_link = True
            self.stats["by_link"] += 1
        if chosen.result is not None:
            ids = self._by_digest.get(chosen.result.digest)
            if ids and chosen.flow_id in ids:
                ids.remove(chosen.flow_id)
                if not ids:
                    del self._by_digest[chosen.result.digest]
        return chosen

    def awaiting(self, client_flow_id: str | None) -> bool:
        """Is an upstream call the request side linked to this client flow still open
        (started, its end of stream not read, unclaimed)? O(records)."""
        if client_flow_id is None:
            return False
        return any(is_open_link(r, client_flow_id) for r in self.records.values())

    def resolve(self, verdict: Any, client_flow_id: str | None = None, final: bool = True) -> UpstreamRecord | None:
        """Find, claim and report the upstream record for a client Verdict.

        Calls ``verdict.upstream(outcome, detail)`` (outcome ``"unknown"`` when the
        StopReason proves nothing, or the upstream stream failed) and, when the upstream
        reported usage, ``verdict.upstream_usage(counts)`` (a
        :class:`wire.verdict.UpstreamUsage`) if the Verdict has it. Not ``final`` (the
        resolver will look again): a miss while a linked upstream call is still open keeps
        the client's pending request.
        """
        if not final and self.awaiting(client_flow_id):
            return None  # its own call is still open: no other record with the same digest
        rec = self.claim(verdict.digest(), client_flow_id)
        if client_flow_id is not None:
            self.forget_client(client_flow_id)
        if rec is None or rec.result is None:
            self.stats["unresolved"] += 1
            return None
        self.stats["resolved"] += 1
        r = rec.result
        detail = r.detail() + (", matched by prompt (content digest differs)" if rec.by_link else "")
        verdict.upstream(r.outcome or "unknown", detail, meaning=getattr(r, "meaning", None))
        report_usage = getattr(verdict, "upstream_usage", None)
        counts = r.counts()
        if counts is not None and report_usage is not None:
            report_usage(counts)
        return rec

    def resolver(self, client_flow_id: str | None = None) -> Resolver:
        """A :class:`Resolver` to set as ``verdict.resolver`` for one client flow."""
        return Resolver(self, client_flow_id)

    # --- memory bounds -------------------------------------------------------------
    def _unindex(self, rec: UpstreamRecord) -> None:
        d = rec.digest
        if d is None:
            return
        ids = self._by_digest.get(d)
        if ids and rec.flow_id in ids:
            ids.remove(rec.flow_id)
            if not ids:
                del self._by_digest[d]

    def _sweep(self) -> None:
        now = self.clock()
        if now - self._swept < 1.0:
            return
        self._swept = now
        for fid in [
            fid
            for fid, r in self.records.items()
            if (r.finished is not None and now - r.finished > self.ttl_finished)
            or (r.finished is None and now - r.started > self.ttl_open)
        ]:
            self._unindex(self.records.pop(fid))
            self.stats["expired"] += 1
        for fid in [fid for fid, p in self.pending.items() if now - p.noted > self.ttl_pending]:
            del self.pending[fid]

    def sweep(self) -> None:
        """Drop expired entries now (normally done on the way, at most once a second)."""
        self._swept = float("-inf")
        self._sweep()
