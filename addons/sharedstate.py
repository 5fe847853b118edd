"""What the sidecar's workers share: the upstream leg's correlation across processes.

With ``streamfix sidecar --workers N`` (streamfix/workers.py) a client turn is served by
one worker and the upstream call CPA makes for it may arrive at another (the balancer
picks a worker per connection on both ports). The two legs meet in the correlator
(wire/correlate.py); across processes its state lives in a store both see. This module
is that store's narrow interface, :class:`Store`, with two implementations:

* :class:`MemoryStore`: in this process (the tests' reference for what a store does);
* :class:`RedisStore`: a real Redis (``streamfix_redis=redis://HOST:PORT/DB``), the one
  workers and machines share;

and :class:`SharedCorrelator`, the correlator over a store: the matching rules are
wire/correlate.py's own (``choose_pending``, ``choose_claim``), only
where the records and pending requests are kept differs.

What crosses workers, and why it is enough:

* a client request's pending entry (output cap, needles), written before the request is
  forwarded to CPA, so the upstream request it causes finds it on any worker;
* an upstream record (its link, then its result: digest, outcome, detail, usage), its
  result written the moment the end-of-stream envelope is read and before that envelope
  is forwarded to CPA, which writes the client's terminal event only after reading it:
  the client leg's worker, asking at its terminal event, finds it (the causality of
  docs/upstream-leg.md, carried across processes by a write that completes first);
* a claim, atomic in the store (a record is claimed once, whichever worker asks).

Every store call is synchronous and bounded: Redis is asked with a socket timeout
(``streamfix_redis_timeout_ms``, 100 ms) and no retry. When Redis does not answer, one
line is logged and the store is skipped for a second (then one call tries again): a
client turn meanwhile gets no upstream evidence, so the client-leg rules decide its
verdict, as for a turn whose upstream call was never seen; nothing waits past the bound,
and no record is ever taken for a turn it does not belong to. When Redis answers again,
one line says so and correlation resumes (what Redis lost is lost: those turns are
decided by the client leg).

Redis keys (prefix ``streamfix:``, every one with a TTL but the pending index, which its
readers sweep): ``p:<client flow>`` a pending request (hash), ``ph`` the pending index
(client flow -> the head of its last needle, when, which worker), ``r:<upstream flow>`` an
upstream record (hash), ``d:<digest>`` the records with that output digest, ``l:<client
flow>`` the records linked to that client flow. A single Redis (or a primary): Redis
Cluster is not supported (the scripts read keys they are not given).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any, Protocol, TypeVar

import orjson
from streamfix.wire.correlate import (
    Correlator,
    PendingRequest,
    UpstreamRecord,
    choose_claim,
    choose_pending,
    client_cap,
    client_needles,
    is_open_link,
)
from streamfix.wire.verdict import UpstreamUsage

logger = logging.getLogger("streamfix.sharedstate")

Digest = tuple[str, int, str, int]
HEAD = 48
"""Characters of a pending request's last needle kept in the index: a request's needle
can only be in an upstream prompt if its head is, so only those are read whole."""
BACKOFF_S = 1.0
"""After Redis failed to answer, how long the store is skipped before one call tries again."""
T = TypeVar("T")


# --- what a client leg needs of another worker's upstream record ------------------------
class SharedUsage:
    """An upstream call's usage as another worker reported it (what
    :meth:`wire.devin.Usage.counts` gave there)."""

    __slots__ = ("_counts",)

    def __init__(self, counts: UpstreamUsage) -> None:
        self._counts = counts

    def counts(self) -> UpstreamUsage:
        return self._counts

    @property
    def input_tokens(self) -> int:
        return self._counts.input_tokens

    @property
    def output_tokens(self) -> int:
        return self._counts.output_tokens

    @property
    def cached_tokens(self) -> int:
        return self._counts.cached_tokens


class SharedResult:
    """A finished upstream call as the correlator's resolver reads it (``digest``,
    ``outcome``, ``detail()``, ``usage.counts()``): the same facts whatever the
    provider's own result type was."""

    __slots__ = ("_detail", "digest", "meaning", "outcome", "usage", "worker")

    def __init__(
        self, digest: Digest, outcome: str | None, detail: str, usage: SharedUsage | None, worker: str = "",
        meaning: str | None = None,
    ):  # fmt: skip
        self.digest = digest
        self.outcome = outcome
        self._detail = detail
        self.usage = usage
        self.worker = worker
        """The worker that read the upstream call ("" when not told)."""
        self.meaning = meaning
        """What its stop value meant (``wire.upstream_call.CallResult.meaning``)."""

    def detail(self) -> str:
        return self._detail

    def counts(self) -> UpstreamUsage | None:
        """The usage for the verdict, as the reading worker's result gave it."""
        return self.usage.counts() if self.usage is not None else None


def summary(result: Any, worker: str = "") -> SharedResult:
    """The facts of an upstream result another worker's client leg needs (Devin's
    :class:`wire.devin.TapResult` or another provider's :class:`wire.upstream_call.CallResult`:
    both give ``digest``, ``outcome``, ``detail()`` and ``counts()``)."""
    counts = result.counts()
    digest = tuple(result.digest)
    return SharedResult(digest, result.outcome, result.detail(), SharedUsage(counts) if counts else None, worker,  # type: ignore[arg-type]
                        getattr(result, "meaning", None))  # fmt: skip


def _dump_result(r: SharedResult) -> bytes:
    u = r.usage.counts() if r.usage is not None else None
    return orjson.dumps({"digest": list(r.digest), "outcome": r.outcome, "detail": r.detail(),
                         "usage": asdict(u) if u is not None else None, "worker": r.worker,
                         "meaning": r.meaning})  # fmt: skip


def _load_result(raw: bytes | str) -> SharedResult | None:
    try:
        d = orjson.loads(raw)
        u = d.get("usage")
        usage = SharedUsage(UpstreamUsage(**u)) if isinstance(u, dict) else None
        dg = d["digest"]
        m = d.get("meaning")
        return SharedResult((str(dg[0]), int(dg[1]), str(dg[2]), int(dg[3])), d.get("outcome"), str(d["detail"]),
                            usage, str(d.get("worker") or ""), m if isinstance(m, str) else None)  # fmt: skip
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
        return None


def digest_key(d: Digest) -> str:
    return f"{d[0]}:{d[1]}:{d[2]}:{d[3]}"


# --- the interface ------------------------------------------------------------------------
class Store(Protocol):
    """What the correlator of several processes keeps in common. Every method returns at
    once or within the store's bound, and never raises (a store that cannot answer
    behaves as an empty one)."""

    def add_pending(self, p: PendingRequest, worker: str, ttl: float) -> None: ...
    def drop_pending(self, client_flow_id: str) -> None: ...
    def pending_candidates(self, contents: list[str], ttl: float) -> list[PendingRequest]:
        """The pending requests whose last needle's head is in one of ``contents`` (a
        superset of those whose last needle is: the rules decide among them)."""
        ...

    def pending_matched(self, client_flow_id: str) -> None: ...
    def add_record(self, rec: UpstreamRecord, worker: str, ttl: float, matched: str | None = None) -> None:
        """An upstream call started; ``matched``: the pending request it was matched to
        (counted as matched, in the same call)."""
        ...

    def finish_record(self, upstream_flow_id: str, finished: float, result: SharedResult, ttl: float) -> None: ...
    def drop_record(self, upstream_flow_id: str) -> None: ...
    def records(
        self, digest: Digest | None, client_flow_id: str | None
    ) -> tuple[list[UpstreamRecord], list[UpstreamRecord]]:
        """(the records with this output digest, the records linked to this client flow)."""
        ...

    def claim(self, upstream_flow_id: str, client_flow_id: str, drop_pending: bool = False) -> bool:
        """Take a finished record for a client flow: True for exactly one caller. With
        ``drop_pending``, the client flow's pending request goes too (in the same call)."""
        ...

    def forget_worker(self, worker: str) -> int:
        """Drop the pending requests a (restarted) worker's previous process left; how many."""
        ...


# --- in this process ------------------------------------------------------------------------
class MemoryStore:
    """:class:`Store` in one process's memory (reference and tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.pending: dict[str, tuple[PendingRequest, str, float]] = {}
        self.recs: dict[str, tuple[UpstreamRecord, float]] = {}
        self.by_digest: dict[Digest, set[str]] = {}
        self.linked: dict[str, set[str]] = {}

    def _alive(self, until: float) -> bool:
        return self.clock() < until

    def add_pending(self, p: PendingRequest, worker: str, ttl: float) -> None:
        self.pending[p.flow_id] = (_copy_pending(p), worker, self.clock() + ttl)

    def drop_pending(self, client_flow_id: str) -> None:
        self.pending.pop(client_flow_id, None)

    def pending_candidates(self, contents: list[str], ttl: float) -> list[PendingRequest]:
        out = []
        for fid, (p, _, until) in list(self.pending.items()):
            if not self._alive(until):
                del self.pending[fid]
            elif any(p.needles[-1][:HEAD] in c for c in contents):
                out.append(_copy_pending(p))
        return out

    def pending_matched(self, client_flow_id: str) -> None:
        got = self.pending.get(client_flow_id)
        if got is not None:
            got[0].upstream_flow_ids.append("?")

    def add_record(self, rec: UpstreamRecord, worker: str, ttl: float, matched: str | None = None) -> None:
        if matched is not None:
            self.pending_matched(matched)
        self.recs[rec.flow_id] = (_copy_record(rec), self.clock() + ttl)
        if rec.client_flow_id is not None:
            self.linked.setdefault(rec.client_flow_id, set()).add(rec.flow_id)

    def finish_record(self, upstream_flow_id: str, finished: float, result: SharedResult, ttl: float) -> None:
        got = self.recs.get(upstream_flow_id)
        rec = got[0] if got is not None else UpstreamRecord(upstream_flow_id, finished)
        rec.finished, rec.result = finished, result  # type: ignore[assignment]  # read as a TapResult/CallResult is
        self.recs[upstream_flow_id] = (rec, self.clock() + ttl)
        self.by_digest.setdefault(result.digest, set()).add(upstream_flow_id)

    def drop_record(self, upstream_flow_id: str) -> None:
        self.recs.pop(upstream_flow_id, None)

    def _get(self, ids: Iterable[str]) -> list[UpstreamRecord]:
        out = []
        for fid in sorted(ids):
            got = self.recs.get(fid)
            if got is not None and self._alive(got[1]):
                out.append(_copy_record(got[0]))
        return out

    def records(
        self, digest: Digest | None, client_flow_id: str | None
    ) -> tuple[list[UpstreamRecord], list[UpstreamRecord]]:
        by = self._get(self.by_digest.get(digest, ())) if digest is not None else []
        linked = self._get(self.linked.get(client_flow_id, ())) if client_flow_id is not None else []
        return by, linked

    def claim(self, upstream_flow_id: str, client_flow_id: str, drop_pending: bool = False) -> bool:
        got = self.recs.get(upstream_flow_id)
        if got is None or got[0].finished is None or got[0].claimed_by is not None:
            return False
        got[0].claimed_by = client_flow_id
        if drop_pending:
            self.drop_pending(client_flow_id)
        return True

    def forget_worker(self, worker: str) -> int:
        gone = [fid for fid, (_, w, _) in self.pending.items() if w == worker]
        for fid in gone:
            del self.pending[fid]
        return len(gone)


def _copy_pending(p: PendingRequest) -> PendingRequest:
    return PendingRequest(p.flow_id, p.path, p.cap, p.cap_field, p.needles, p.noted, list(p.upstream_flow_ids))


def _copy_record(r: UpstreamRecord) -> UpstreamRecord:
    return UpstreamRecord(
        r.flow_id,
        r.started,
        r.client_flow_id,
        r.max_tokens_sent,
        r.max_tokens_original,
        finished=r.finished,
        result=r.result,
        provider=r.provider,
        claimed_by=r.claimed_by,
        link_ambiguous=r.link_ambiguous,
    )


# --- Redis ------------------------------------------------------------------------------------
_GATHER = """
local out = {}
for i = 1, 2 do
  local part = {}
  if KEYS[i] ~= '' then
    for _, id in ipairs(redis.call('SMEMBERS', KEYS[i])) do
      local h = redis.call('HGETALL', ARGV[1] .. id)
      if #h > 0 then
        part[#part + 1] = id
        part[#part + 1] = h
      end
    end
  end
  out[i] = part
end
return out
"""
"""The records of the digest set KEYS[1] and the link set KEYS[2] (either may be ''),
each as [id, [field, value, ...], ...]: data only, the rules decide in Python."""
_CLAIM = """
if redis.call('HEXISTS', KEYS[1], 'finished') == 1 and redis.call('HSETNX', KEYS[1], 'claimed', ARGV[1]) == 1 then
  if KEYS[2] then
    redis.call('DEL', KEYS[2])
    redis.call('HDEL', KEYS[3], ARGV[1])
  end
  return 1
end
return 0
"""
"""Claim the record KEYS[1] for client flow ARGV[1]; then drop its pending request
(KEYS[2], and its entry in the index KEYS[3]) when given."""
_MATCHED = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HINCRBY', KEYS[1], 'matched', 1) end
return 0
"""


class RedisStore:
    """:class:`Store` in a real Redis, every call bounded (see the module docstring)."""

    def __init__(self, url: str, timeout_s: float = 0.1, prefix: str = "streamfix:") -> None:
        import redis  # only imported when a store is configured
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = url
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.redis = redis
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
            client_name="streamfix",
        )
        self._gather = self.client.register_script(_GATHER)
        self._claim = self.client.register_script(_CLAIM)
        self._matched = self.client.register_script(_MATCHED)
        self.down_since: float | None = None
        self._retry_at = 0.0
        self.failures = 0
        self.calls = 0

    def where(self) -> str:
        """The URL without a password, for log lines."""
        from urllib.parse import urlsplit

        u = urlsplit(self.url)
        host = u.hostname or ""
        return f"{u.scheme}://{host}{':' + str(u.port) if u.port else ''}{u.path or ''}"

    # --- the bound ----------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], default: T) -> T:
        now = time.monotonic()
        if self.down_since is not None and now < self._retry_at:
            return default
        self.calls += 1
        try:
            out = fn()
        except (self.redis.RedisError, OSError) as e:
            self.failures += 1
            self._retry_at = time.monotonic() + BACKOFF_S
            if self.down_since is None:
                self.down_since = now
                logger.warning(
                    f"streamfix: Redis at {self.where()} does not answer ({what}: {type(e).__name__}: {e}); "
                    "the upstream leg's evidence is off for turns meanwhile (the client-leg rules decide their "
                    f"verdicts); trying again every {BACKOFF_S:g} s"
                )
            return default
        if self.down_since is not None:
            logger.warning(
                f"streamfix: Redis at {self.where()} answers again after {time.monotonic() - self.down_since:.1f} s; "
                "correlation across workers resumes"
            )
            self.down_since = None
        return out

    def mark_down(self) -> None:
        """Skip Redis for a while, as after a failed call (without the log line)."""
        self.down_since = time.monotonic()
        self._retry_at = self.down_since + BACKOFF_S

    def ping(self) -> str | None:
        """None when Redis answers, else why not (the bound applies; nothing is logged)."""
        try:
            self.client.ping()
            return None
        except (self.redis.RedisError, OSError) as e:
            return f"{type(e).__name__}: {e}"

    def _k(self, kind: str, key: str) -> str:
        return f"{self.prefix}{kind}:{key}"

    # --- request side -------------------------------------------------------------------
    def add_pending(self, p: PendingRequest, worker: str, ttl: float) -> None:
        k = self._k("p", p.flow_id)

        def do() -> None:
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(k, mapping={"path": p.path, "cap": p.cap or 0, "capf": p.cap_field or "",
                                  "needles": orjson.dumps(p.needles), "noted": repr(p.noted), "matched": 0})  # fmt: skip
            pipe.pexpire(k, int(ttl * 1000))
            pipe.hset(self.prefix + "ph", p.flow_id, orjson.dumps([p.needles[-1][:HEAD], p.noted, worker]))
            pipe.execute()

        self._call("add_pending", do, None)

    def drop_pending(self, client_flow_id: str) -> None:
        def do() -> None:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(self._k("p", client_flow_id))
            pipe.hdel(self.prefix + "ph", client_flow_id)
            pipe.execute()

        self._call("drop_pending", do, None)

    def pending_candidates(self, contents: list[str], ttl: float) -> list[PendingRequest]:
        def do() -> list[PendingRequest]:
            index: dict[bytes, bytes] = self.client.hgetall(self.prefix + "ph")  # type: ignore[assignment]  # bytes: no decode_responses
            now = time.time()
            stale: list[bytes] = []
            cands: list[bytes] = []
            for fid, raw in index.items():
                try:
                    head, noted, _ = orjson.loads(raw)
                except (orjson.JSONDecodeError, ValueError, TypeError):
                    stale.append(fid)
                    continue
                if now - noted > ttl:
                    stale.append(fid)
                elif any(head in c for c in contents):
                    cands.append(fid)
            pipe = self.client.pipeline(transaction=False)
            if stale:
                pipe.hdel(self.prefix + "ph", *stale)
            for fid in cands:
                pipe.hgetall(self._k("p", fid.decode()))
            got = pipe.execute() if stale or cands else []
            out = []
            for fid, h in zip(cands, got[1:] if stale else got):
                p = _pending_of(fid.decode(), h)
                if p is not None:
                    out.append(p)
            return out

        return self._call("pending_candidates", do, [])

    def pending_matched(self, client_flow_id: str) -> None:
        self._call("pending_matched", lambda: self._matched(keys=[self._k("p", client_flow_id)]), None)

    def forget_worker(self, worker: str) -> int:
        def do() -> int:
            index: dict[bytes, bytes] = self.client.hgetall(self.prefix + "ph")  # type: ignore[assignment]  # bytes: no decode_responses
            gone: list[bytes] = []
            for fid, raw in index.items():
                try:
                    if orjson.loads(raw)[2] == worker:
                        gone.append(fid)
                except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
                    gone.append(fid)
            if gone:
                pipe = self.client.pipeline(transaction=False)
                pipe.hdel(self.prefix + "ph", *gone)
                pipe.delete(*(self._k("p", f.decode()) for f in gone))
                pipe.execute()
            return len(gone)

        return self._call("forget_worker", do, 0)

    # --- response side ------------------------------------------------------------------
    def add_record(self, rec: UpstreamRecord, worker: str, ttl: float, matched: str | None = None) -> None:
        k = self._k("r", rec.flow_id)

        def do() -> None:
            fields: dict[str, Any] = {
                "started": repr(rec.started),
                "amb": int(rec.link_ambiguous),
                "worker": worker,
                "prov": rec.provider,
            }
            if rec.client_flow_id is not None:
                fields["cid"] = rec.client_flow_id
            if rec.max_tokens_sent is not None:
                fields["sent"] = rec.max_tokens_sent
            if rec.max_tokens_original is not None:
                fields["orig"] = rec.max_tokens_original
            pipe = self.client.pipeline(transaction=False)
            if matched is not None:
                self._matched(keys=[self._k("p", matched)], client=pipe)
            pipe.hset(k, mapping=fields)  # type: ignore[arg-type]  # redis-py's stubs take no Any values
            pipe.pexpire(k, int(ttl * 1000))
            if rec.client_flow_id is not None:
                lk = self._k("l", rec.client_flow_id)
                pipe.sadd(lk, rec.flow_id)
                pipe.pexpire(lk, int(ttl * 1000))
            pipe.execute()

        self._call("add_record", do, None)

    def finish_record(self, upstream_flow_id: str, finished: float, result: SharedResult, ttl: float) -> None:
        k = self._k("r", upstream_flow_id)
        dk = self._k("d", digest_key(result.digest))

        def do() -> None:
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(k, mapping={"finished": repr(finished), "res": _dump_result(result)})
            pipe.pexpire(k, int(ttl * 1000))
            pipe.sadd(dk, upstream_flow_id)
            pipe.pexpire(dk, int(ttl * 1000))
            pipe.execute()

        self._call("finish_record", do, None)

    def drop_record(self, upstream_flow_id: str) -> None:
        self._call("drop_record", lambda: self.client.delete(self._k("r", upstream_flow_id)), None)

    def records(
        self, digest: Digest | None, client_flow_id: str | None
    ) -> tuple[list[UpstreamRecord], list[UpstreamRecord]]:
        keys = [self._k("d", digest_key(digest)) if digest is not None else "",
                self._k("l", client_flow_id) if client_flow_id is not None else ""]  # fmt: skip

        def do() -> tuple[list[UpstreamRecord], list[UpstreamRecord]]:
            parts = self._gather(keys=keys, args=[self.prefix + "r:"])
            out: list[list[UpstreamRecord]] = []
            for part in parts:
                recs = []
                for i in range(0, len(part), 2):
                    rec = _record_of(part[i].decode(), part[i + 1])
                    if rec is not None:
                        recs.append(rec)
                out.append(sorted(recs, key=lambda r: r.flow_id))
            return out[0], out[1]

        none: tuple[list[UpstreamRecord], list[UpstreamRecord]] = ([], [])
        return self._call("records", do, none)

    def claim(self, upstream_flow_id: str, client_flow_id: str, drop_pending: bool = False) -> bool:
        keys = [self._k("r", upstream_flow_id)]
        if drop_pending:
            keys += [self._k("p", client_flow_id), self.prefix + "ph"]
        return bool(self._call("claim", lambda: self._claim(keys=keys, args=[client_flow_id]), 0))


def _pending_of(fid: str, h: dict[bytes, bytes]) -> PendingRequest | None:
    try:
        needles = tuple(orjson.loads(h[b"needles"]))
        cap = int(h[b"cap"]) or None
        return PendingRequest(fid, h[b"path"].decode(), cap, h[b"capf"].decode() or None, needles,
                              float(h[b"noted"]), ["?"] * int(h.get(b"matched", b"0")))  # fmt: skip
    except (KeyError, ValueError, TypeError, orjson.JSONDecodeError):
        return None  # expired between the index and the read, or not ours


def _record_of(fid: str, flat: list[bytes]) -> UpstreamRecord | None:
    h = {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}
    try:
        finished = float(h[b"finished"]) if b"finished" in h else None
        started = float(h[b"started"]) if b"started" in h else (finished or 0.0)
        result = _load_result(h[b"res"]) if b"res" in h else None
        if finished is not None and result is None:
            return None
        cid = h.get(b"cid")
        claimed = h.get(b"claimed")
        return UpstreamRecord(
            fid,
            started,
            cid.decode() if cid is not None else None,
            int(h[b"sent"]) if b"sent" in h else None,
            int(h[b"orig"]) if b"orig" in h else None,
            finished=finished,
            result=result,  # type: ignore[arg-type]
            provider=h.get(b"prov", b"devin").decode(),
            claimed_by=claimed.decode() if claimed is not None else None,
            link_ambiguous=h.get(b"amb") == b"1",
        )
    except (KeyError, ValueError, TypeError):
        return None


# --- the correlator over a store ----------------------------------------------------------
class SharedCorrelator(Correlator):
    """:class:`wire.correlate.Correlator` whose pending requests and upstream records live
    in a :class:`Store` (its rules, its resolver). This process's own upstream records are
    also kept as the base class keeps them (``records``: addons/upstream.py asks them of
    the flows it started); what a client leg claims comes from the store."""

    def __init__(self, store: Store, worker: str = "", **kw: Any) -> None:
        kw.setdefault("clock", time.time)  # the store's times are compared across processes
        super().__init__(**kw)
        self.store = store
        self.worker = worker
        self._noted: set[str] = set()
        """Client flows whose pending request this process wrote (only those are dropped)."""
        self._matched: dict[str, str] = {}
        """Upstream flow -> the pending request it was matched to, counted when it starts."""
        self._digest: Any = None
        self._gathered: tuple[Any, str | None, list[UpstreamRecord], list[UpstreamRecord]] | None = None
        """Within one resolve: the records read by ``awaiting``, for the claim after it."""

    # --- request side ---------------------------------------------------------------
    def note_client_request(self, flow_id: str, path: str, body: Any) -> PendingRequest | None:
        if not isinstance(body, dict):
            return None
        needles = client_needles(path, body)
        if not needles:
            return None
        cap, cap_field = client_cap(body)
        p = PendingRequest(flow_id, path, cap, cap_field, needles, self.clock())
        self.store.add_pending(p, self.worker, self.ttl_pending)
        self._noted.add(flow_id)
        return p

    def forget_client(self, flow_id: str) -> None:
        if flow_id in self._noted:
            self._noted.discard(flow_id)
            self.store.drop_pending(flow_id)

    def match_request(self, upstream_flow_id: str, info: Any) -> PendingRequest | None:
        contents = [text for _, text in info.prompts if text]
        if not contents:
            return None
        chosen, ambiguous = choose_pending(self.store.pending_candidates(contents, self.ttl_pending), contents)
        if chosen is not None:
            self._matched[upstream_flow_id] = chosen.flow_id  # counted in the store by upstream_started
            chosen.upstream_flow_ids.append(upstream_flow_id)
            chosen.last_match_ambiguous = ambiguous
            self.stats["requests_matched"] += 1
        return chosen

    # --- response side --------------------------------------------------------------
    def upstream_started(
        self,
        flow_id: str,
        client_flow_id: str | None = None,
        max_tokens_sent: int | None = None,
        max_tokens_original: int | None = None,
        link_ambiguous: bool = False,
        provider: str = "devin",
    ) -> UpstreamRecord:
        rec = super().upstream_started(
            flow_id, client_flow_id, max_tokens_sent, max_tokens_original, link_ambiguous, provider
        )
        self.store.add_record(rec, self.worker, self.ttl_open, self._matched.pop(flow_id, None))
        return rec

    def upstream_finished(self, flow_id: str, result: Any) -> UpstreamRecord | None:
        rec = self.records.get(flow_id)
        before = rec.result if rec is not None else None
        rec = super().upstream_finished(flow_id, result)
        # the first result (a provider's decisive event), and the one that replaced it at the
        # body's end while nobody had claimed it (a claim in another worker wins: the store's
        # record is then claimed, and a client reads claimed records never again)
        if rec is not None and rec.finished is not None and rec.result is result and result is not before:
            self.store.finish_record(flow_id, rec.finished, summary(result, self.worker), self.ttl_finished)
        return rec

    def upstream_dropped(self, flow_id: str) -> None:
        super().upstream_dropped(flow_id)
        self.store.drop_record(flow_id)

    # --- the client leg's claim ------------------------------------------------------
    def resolve(self, verdict: Any, client_flow_id: str | None = None, final: bool = True) -> UpstreamRecord | None:
        self._digest = verdict.digest()  # awaiting() reads the records once for both looks
        try:
            return super().resolve(verdict, client_flow_id, final)
        finally:
            self._digest = self._gathered = None

    def _records(self, digest: Any, client_flow_id: str | None):
        g = self._gathered
        if g is not None and g[0] == digest and g[1] == client_flow_id:
            self._gathered = None
            return g[2], g[3]
        return self.store.records(digest, client_flow_id)

    def claim(self, digest: Digest, client_flow_id: str | None = None) -> UpstreamRecord | None:
        empty = digest[1] == 0 and digest[3] == 0
        for _ in range(3):  # another worker may take the chosen record first: choose again
            if empty:  # an empty output is only ever matched through its link: only linked records
                _, linked = self._records(None, client_flow_id)
                by_digest = [r for r in linked if r.digest == digest]
            else:
                by_digest, linked = self._records(digest, client_flow_id)
            chosen, n, by_link = choose_claim(by_digest, linked, digest, client_flow_id)
            if chosen is None:
                return None
            drop = client_flow_id is not None and client_flow_id in self._noted
            if self.store.claim(chosen.flow_id, client_flow_id or "?", drop):
                if drop:
                    self._noted.discard(client_flow_id)  # its pending request went with the claim
                chosen.claimed_by = client_flow_id or "?"
                chosen.by_link = by_link
                if by_link:
                    self.stats["by_link"] += 1
                if n > 1 and not by_link:
                    self.stats["ties"] += 1
                return chosen
        return None

    def awaiting(self, client_flow_id: str | None) -> bool:
        if client_flow_id is None:
            return False
        d = self._digest
        if d is not None and d[1] == 0 and d[3] == 0:
            d = None  # an empty output: only its linked records count (claim)
        by_digest, linked = self.store.records(d, client_flow_id)
        if self._digest is not None:
            self._gathered = (d, client_flow_id, by_digest, linked)
        return any(is_open_link(r, client_flow_id) for r in linked)
