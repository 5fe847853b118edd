"""addons/sharedstate.py: the correlator of several workers, over its in-memory store and a
real Redis (Debian's redis-server, started here on 127.0.0.1).

Two (or three) correlators stand for the workers: a client request noted by one is
matched by the upstream request another sees; the record that one finishes is claimed by
the first, once, whichever asks first; a linked call still open makes the resolver look
again; with Redis gone every call returns within its bound and says so once, and when
Redis is back correlation resumes.
"""

from __future__ import annotations

import logging
import random
import time

import pytest
from correlatekit import client_verdict, conversation, frame, upstream_request
from streamfix.addons.sharedstate import MemoryStore, RedisStore, SharedCorrelator
from streamfix.wire.connect import encode_end_stream
from streamfix.wire.devin import DevinTap, read_request
from streamfix.wire.verdict import Verdict
from workers_support import REDIS, Redis, needs_redis


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    if REDIS is None:
        pytest.skip("no redis-server on PATH (scripts/install-balancer installs it)")
    r = Redis(tmp_path_factory.mktemp("redis"))
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture(params=["memory", "redis"])
def workers(request):
    """Three correlators over one store: three workers' views."""
    if request.param == "memory":
        store = MemoryStore()
        return [SharedCorrelator(store, f"w{i}") for i in range(3)]
    r = request.getfixturevalue("redis_server")
    prefix = f"t{random.randrange(1 << 30)}:"  # each test its own keys
    return [SharedCorrelator(RedisStore(r.url, 1.0, prefix=prefix), f"w{i}") for i in range(3)]


def finish(corr, uid: str, frames: list[bytes]):
    tap = DevinTap()
    tap.feed(b"".join(frames))
    return corr.upstream_finished(uid, tap.result())


def test_client_leg_in_one_worker_upstream_call_in_another(workers):
    a, b, _ = workers
    body = {"messages": [{"role": "user", "content": "write the page [conv:x1]"}], "max_tokens": 50}
    p = a.note_client_request("c1", "/v1/chat/completions", body)
    got = b.match_request("up1", read_request(upstream_request(["write the page [conv:x1]"])))
    assert got is not None and (got.flow_id, got.cap, got.cap_field) == ("c1", 50, "max_tokens") and p is not None
    b.upstream_started("up1", got.flow_id, 50, 128000, got.last_match_ambiguous)
    frames, text, args = conversation(4, "max_tokens")
    finish(b, "up1", frames)
    v = client_verdict(text, args, random.Random(3))
    v.resolver = r = a.resolver("c1")
    d = v.decide()
    assert d.outcome == "max_tokens" and r.record.flow_id == "up1"
    assert any(e.source == "upstream" and "MAX_TOKENS" in e.detail for e in d.evidence)
    u = v.upstream_counts
    assert (u.input_tokens, u.output_tokens, u.cached_tokens, u.model) == (109, 44, 5, "m4")
    # the pending request is gone once resolved: a retry of the same prompt matches nothing
    assert b.match_request("up2", read_request(upstream_request(["write the page [conv:x1]"]))) is None


def test_twenty_conversations_across_three_workers(workers):
    rng = random.Random(9)
    kinds = ["max_tokens", "stop", "content_filter", "tool"]
    jobs = []
    for i in range(20):
        client, upstream = rng.sample(workers, 2)
        prompt = f"conversation {i} [conv:t{i}]"
        client.note_client_request(f"c{i}", "/v1/responses", {"input": prompt})
        p = upstream.match_request(f"u{i}", read_request(upstream_request([prompt])))
        assert p is not None and p.flow_id == f"c{i}"
        upstream.upstream_started(f"u{i}", p.flow_id)
        jobs.append((client, upstream, i, kinds[i % 4]))
    for client, upstream, i, kind in jobs:
        frames, _, _ = conversation(i, kind)
        finish(upstream, f"u{i}", frames)
    for client, _, i, kind in reversed(jobs):
        _, text, args = conversation(i, kind)
        v = client_verdict(text, args, random.Random(i))
        v.resolver = r = client.resolver(f"c{i}")
        d = v.decide()
        want = {"max_tokens": "max_tokens", "content_filter": "content_filter"}.get(kind, "complete")
        assert (d.outcome, r.record.flow_id, v.upstream_counts.input_tokens) == (want, f"u{i}", 105 + i)


def test_a_record_is_claimed_once_whichever_worker_asks(workers):
    up = workers[2]
    frames, text, args = conversation(3, "stop")
    for name in ("a", "b"):
        up.upstream_started(name)
        finish(up, name, frames)
    got = [w.resolve(client_verdict(text, args, random.Random(k)), f"c{k}") for k, w in enumerate(workers)]
    assert sorted(r.flow_id for r in got if r) == ["a", "b"] and got.count(None) == 1


def test_the_resolver_looks_again_while_the_linked_call_is_open_elsewhere(workers):
    a, b, _ = workers
    p = a.note_client_request("c", "/v1/chat/completions", {"messages": [{"role": "user", "content": "go [conv:o]"}]})
    assert b.match_request("up", read_request(upstream_request(["go [conv:o]"]))).flow_id == p.flow_id
    b.upstream_started("up", p.flow_id)
    tap = DevinTap()
    tap.feed(frame(text=b"I cannot", stop_reason=11))
    v = Verdict()
    v.observe_text("I cannot")
    v.resolver = r = a.resolver("c")
    assert v.decide().outcome == "unknown" and r.waiting and r.record is None
    tap.feed(encode_end_stream())
    b.upstream_finished("up", tap.result())
    d = v.decide()
    assert d.outcome == "content_filter" and r.record.flow_id == "up" and not r.waiting


def test_a_restarted_workers_pending_requests_are_dropped(workers):
    a, b, _ = workers
    a.note_client_request("old", "/v1/responses", {"input": "stale [conv:s]"})
    assert a.store.forget_worker("w0") == 1
    assert b.match_request("u", read_request(upstream_request(["stale [conv:s]"]))) is None


@needs_redis
def test_redis_gone_every_call_is_bounded_one_line_then_it_resumes(tmp_path, caplog):
    r = Redis(tmp_path)
    try:
        store = RedisStore(r.url, 0.2, prefix="gone:")
        a, b = SharedCorrelator(store, "w0"), SharedCorrelator(RedisStore(r.url, 0.2, prefix="gone:"), "w1")
        r.stop()
        caplog.set_level(logging.WARNING, "streamfix.sharedstate")
        t0 = time.monotonic()
        assert a.note_client_request("c", "/v1/responses", {"input": "hello [conv:g]"}) is not None
        assert b.match_request("u", read_request(upstream_request(["hello [conv:g]"]))) is None
        b.upstream_started("u")
        frames, text, args = conversation(1, "max_tokens")
        finish(b, "u", frames)
        v = client_verdict(text, args, random.Random(1))
        v.resolver = a.resolver("c")
        d = v.decide()
        assert all(e.source != "upstream" for e in d.evidence)  # the client-leg rules decided
        took = time.monotonic() - t0
        assert took < 10, took  # a refused connection fails at once; the bound is 0.2 s per breaker period
        lines = [x for x in caplog.messages if "does not answer" in x]
        assert len(lines) == 2, lines  # once per process (store), not once per call
        r.start()
        time.sleep(1.1)  # the breaker's pause
        a.note_client_request("c2", "/v1/responses", {"input": "again [conv:g2]"})
        p = b.match_request("u2", read_request(upstream_request(["again [conv:g2]"])))
        assert p is not None and p.flow_id == "c2"
        assert any("answers again" in x for x in caplog.messages)
    finally:
        r.stop()


@needs_redis
def test_a_redis_that_stalls_is_waited_for_no_longer_than_the_bound(tmp_path):
    """A Redis that accepts but never answers (SIGSTOP): one call waits the timeout, the
    next ones return at once while the breaker is open."""
    import signal

    r = Redis(tmp_path)
    try:
        store = RedisStore(r.url, 0.15, prefix="stall:")
        corr = SharedCorrelator(store, "w0")
        corr.note_client_request("c", "/v1/responses", {"input": "x [conv:st]"})
        r.proc.signal(signal.SIGSTOP)
        t0 = time.monotonic()
        corr.note_client_request("c2", "/v1/responses", {"input": "y [conv:st2]"})
        first = time.monotonic() - t0
        t1 = time.monotonic()
        for i in range(20):
            corr.awaiting(f"c{i}")
        rest = time.monotonic() - t1
        r.proc.signal(signal.SIGCONT)
        assert 0.1 <= first < 3.0, first  # it waited its timeout (0.15 s), not more than a generous bound
        assert rest < 1.0, rest  # the breaker: 20 calls return at once
    finally:
        r.stop()


def test_an_empty_output_is_matched_only_through_its_link_across_workers(workers):
    a, b, c = workers
    tap = DevinTap()
    tap.feed(frame(stop_reason=11) + encode_end_stream())
    b.upstream_started("up", client_flow_id="mine")
    b.upstream_finished("up", tap.result())
    assert c.resolve(Verdict(), "other") is None  # same (empty) digest, not its link
    v = Verdict()
    v.resolver = a.resolver("mine")
    d = v.decide()
    assert d.outcome == "content_filter" and d.evidence[0].detail == "Devin StopReason 11 CONTENT_FILTER"


def test_a_failed_upstream_call_reports_unknown_across_workers(workers):
    a, b, _ = workers
    tap = DevinTap()
    tap.feed(frame(text=b"hi", stop_reason=3) + encode_end_stream("internal", "boom"))
    b.upstream_started("up")
    b.upstream_finished("up", tap.result())
    v = Verdict()
    v.observe_text("hi")
    v.resolver = a.resolver("c")
    d = v.decide()
    assert d.outcome != "max_tokens"
    assert any(e.detail.endswith("trailer error internal") for e in d.evidence)


def test_another_providers_call_crosses_workers_and_its_final_result_wins(workers):
    """A provider call (not Devin's) read in one worker: the record keeps its provider, the
    result its authoritative usage with the reasoning tokens, and the result the body's end
    gave (an in-band error after the decisive event) replaces the first one in the store
    while no client has claimed it."""
    from streamfix.wire.upstream_call import CallResult
    from streamfix.wire.verdict import UpstreamUsage

    a, b, _ = workers
    body = {"messages": [{"role": "user", "content": "write the page [conv:g1]"}], "max_tokens": 50}
    a.note_client_request("c1", "/v1/chat/completions", body)
    got = b.match_request("up1", read_request(upstream_request(["write the page [conv:g1]"])))
    assert got is not None and got.flow_id == "c1"
    b.upstream_started("up1", got.flow_id, link_ambiguous=got.last_match_ambiguous, provider="gemini")
    _, text, args = conversation(7, "max_tokens")
    v = client_verdict(text, args, random.Random(4))
    usage = UpstreamUsage(10, 55, 0, 65, source="usageMetadata", reasoning_tokens=50, authoritative=True)
    first = CallResult("gemini", "STOP", "finishReason", "complete", usage, (), None, v.digest(), 3, 0)
    final = CallResult("gemini", "STOP", "finishReason", "complete", usage, ("503 UNAVAILABLE",), "finish",
                       v.digest(), 4, 0)  # fmt: skip
    b.upstream_finished("up1", first)
    b.upstream_finished("up1", final)
    v.resolver = r = a.resolver("c1")
    d = v.decide()
    assert d.outcome == "failed" and r.record.flow_id == "up1"
    assert any(e.source == "upstream" and "in-band error 503 UNAVAILABLE" in e.detail for e in d.evidence)
    u = v.upstream_counts
    assert (u.input_tokens, u.output_tokens, u.reasoning_tokens, u.authoritative) == (10, 55, 50, True)
    by_digest, _ = a.store.records(v.digest(), "c1")
    assert [rec.provider for rec in by_digest] == ["gemini"]


def test_a_flows_own_link_wins_over_another_flows_record_with_its_digest(workers):
    """wire/correlate.py's rule (tests/wire/test_correlate.py), over the shared store."""
    from correlatekit import own_link_before_anothers_digest

    own_link_before_anothers_digest(workers[0])
