"""wire/correlate.py: upstream flow <-> client flow, by content, under concurrency."""

from __future__ import annotations

import random

import pytest
from correlatekit import STOP, client_verdict, conversation, frame, own_link_before_anothers_digest, upstream_request
from streamfix.wire.connect import encode_end_stream
from streamfix.wire.correlate import Correlator, client_cap, client_needles
from streamfix.wire.devin import DevinTap, read_request
from streamfix.wire.verdict import Verdict


def test_twenty_concurrent_conversations_differing_late():
    rng = random.Random(5)
    corr = Correlator()
    kinds = [list(STOP)[i % 4] for i in range(20)]
    convs = [conversation(i, k) for i, k in enumerate(kinds)]
    taps = [DevinTap() for _ in convs]
    for i in range(20):
        corr.upstream_started(f"up{i}")
    # interleave the 20 streams frame by frame, split at random byte offsets
    queues = [b"".join(f) for f, _, _ in convs]
    finished = []
    while any(queues):
        i = rng.choice([k for k, q in enumerate(queues) if q])
        n = rng.randint(1, 40)
        taps[i].feed(queues[i][:n])
        queues[i] = queues[i][n:]
        if taps[i].ended and i not in finished:
            corr.upstream_finished(f"up{i}", taps[i].result())
            finished.append(i)
    # clients decide in an order unrelated to the upstream finishing order
    order = list(range(20))
    rng.shuffle(order)
    assert order != finished
    for i in order:
        _, text, args = convs[i]
        v = client_verdict(text, args, rng)
        v.resolver = corr.resolver(f"client{i}")
        d = v.decide()
        expect = {"max_tokens": "max_tokens", "content_filter": "content_filter"}.get(kinds[i], "complete")
        assert d.outcome == expect, (i, d)
        up = [e for e in d.evidence if e.source == "upstream"]
        assert up and up[0].detail.startswith(f"Devin StopReason {STOP[kinds[i]]} ")
        assert v.upstream_output_tokens == 40 + i  # the usage of *its* upstream
        c = v.upstream_counts  # all of it, in CPA's mapping
        assert (c.input_tokens, c.output_tokens, c.cached_tokens, c.total_tokens) == (105 + i, 40 + i, 5, 145 + 2 * i)
        assert (c.model, c.source) == (f"m{i}", "field7")
    assert corr.stats["resolved"] == 20 and corr.stats["ties"] == 0
    assert all(r.claimed_by for r in corr.records.values())


def test_unfinished_record_is_not_claimed_until_its_end_of_stream():
    corr = Correlator()
    frames, text, args = conversation(1, "max_tokens")
    tap = DevinTap()
    corr.upstream_started("up")
    tap.feed(b"".join(frames[:-1]))  # everything but the trailer
    v = client_verdict(text, args, random.Random(1))
    assert corr.resolve(v, "c") is None and corr.stats["unresolved"] == 1
    tap.feed(frames[-1])
    corr.upstream_finished("up", tap.result())
    v = client_verdict(text, args, random.Random(2))
    assert corr.resolve(v, "c").flow_id == "up"


def test_a_record_is_claimed_once():
    corr = Correlator()
    for name in ("a", "b"):
        frames, text, args = conversation(3, "stop")
        tap = DevinTap()
        tap.feed(b"".join(frames))
        corr.upstream_started(name)
        corr.upstream_finished(name, tap.result())
    got = [corr.resolve(client_verdict(text, args, random.Random(k)), f"c{k}") for k in range(3)]
    assert [r.flow_id if r else None for r in got] == ["a", "b", None]
    assert corr.stats["ties"] == 1


def test_identical_outputs_are_told_apart_by_the_request_link():
    corr = Correlator()
    results = {}
    for name, kind in (("up-a", "max_tokens"), ("up-b", "stop")):
        frames, text, args = conversation(0, "max_tokens")
        frames[-3] = frame(stop_reason=STOP[kind])  # same content, different StopReason
        tap = DevinTap()
        tap.feed(b"".join(frames))
        results[name] = tap.result()
    # up-a finished first; the link says up-b served client b
    corr.upstream_started("up-a", client_flow_id="client-a")
    corr.upstream_started("up-b", client_flow_id="client-b")
    corr.upstream_finished("up-a", results["up-a"])
    corr.upstream_finished("up-b", results["up-b"])
    vb = client_verdict(text, args, random.Random(0))
    vb.resolver = corr.resolver("client-b")
    assert vb.decide().outcome == "complete"
    va = client_verdict(text, args, random.Random(1))
    va.resolver = r = corr.resolver("client-a")
    assert va.decide().outcome == "max_tokens"
    assert r.record.flow_id == "up-a" and r.record.result.usage.output_tokens == 40


def test_empty_output_matches_only_through_the_link():
    corr = Correlator()
    tap = DevinTap()
    tap.feed(frame(stop_reason=11) + encode_end_stream())
    corr.upstream_started("up", client_flow_id="mine")
    corr.upstream_finished("up", tap.result())
    assert corr.resolve(Verdict(), "other") is None
    v = Verdict()
    v.resolver = corr.resolver("mine")
    d = v.decide()
    assert d.outcome == "content_filter" and d.evidence[0].detail == "Devin StopReason 11 CONTENT_FILTER"


def test_failed_upstream_reports_failed():
    corr = Correlator()
    tap = DevinTap()
    tap.feed(frame(text=b"hi", stop_reason=3) + encode_end_stream("internal", "boom"))
    corr.upstream_started("up")
    corr.upstream_finished("up", tap.result())
    v = Verdict()
    v.observe_text("hi")
    v.resolver = corr.resolver("c")
    d = v.decide()
    assert d.outcome == "failed" and d.failed  # Devin's trailer error, not the StopReason's truncation
    assert any(e.detail.endswith("trailer error internal") for e in d.evidence)


def test_expiry_and_bounds():
    now = [1000.0]
    corr = Correlator(ttl_finished=10, ttl_open=100, ttl_pending=50, max_records=3, clock=lambda: now[0])
    tap = DevinTap()
    tap.feed(frame(text=b"x", stop_reason=2) + encode_end_stream())
    corr.upstream_started("done")
    corr.upstream_finished("done", tap.result())
    corr.upstream_started("open")
    corr.note_client_request("c1", "/v1/responses", {"input": "hello"})
    now[0] += 11
    corr.sweep()
    assert list(corr.records) == ["open"] and "c1" in corr.pending
    v = Verdict()
    v.observe_text("x")
    assert corr.resolve(v) is None
    now[0] += 90
    corr.sweep()
    assert not corr.records and not corr.pending
    for i in range(5):
        corr.upstream_started(f"r{i}")
    assert list(corr.records) == ["r2", "r3", "r4"]
    assert corr.stats["expired"] == 4


# --- request side -----------------------------------------------------------------


def test_client_needles_and_caps_per_api():
    assert client_needles("/v1/responses", {"input": "  hi  "}) == ("hi",)
    body = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "first"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "no"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "tool said"},
            {"type": "message", "role": "user", "content": "second"},
        ],
        "max_output_tokens": 400,
    }
    assert client_needles("/v1/responses", body) == ("first", "tool said", "second")
    assert client_cap(body) == (400, "max_output_tokens")
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "q"}]},
                         {"role": "tool", "content": "r"}], "max_tokens": 9}  # fmt: skip
    assert client_needles("/v1/chat/completions", chat) == ("q", "r") and client_cap(chat) == (9, "max_tokens")
    msgs = {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "out"},
                                                      {"type": "text", "text": "next"}]}], "max_tokens": 32000}  # fmt: skip
    assert client_needles("/v1/messages", msgs) == ("out", "next")
    assert client_cap({"max_tokens": True}) == (None, None)
    assert client_needles("/v1/responses", {"input": [f"{i}" for i in range(20)]}) == ()
    many = {"input": [{"role": "user", "content": f"m{i}"} for i in range(20)]}
    assert client_needles("/v1/responses", many) == tuple(f"m{i}" for i in range(12, 20))


def test_twenty_pending_requests_are_matched_by_prompt_content():
    corr = Correlator()
    # 20 conversations; all end with the same "continue", histories differ
    for i in range(20):
        body = {"input": [{"role": "user", "content": f"task number {i}: build page {i}"},
                          {"role": "user", "content": "continue"}], "max_output_tokens": 100 + i}  # fmt: skip
        corr.note_client_request(f"c{i}", "/v1/responses", body)
    order = list(range(20))
    random.Random(3).shuffle(order)
    for i in order:
        info = read_request(upstream_request([f"task number {i}: build page {i}", "continue"]))
        p = corr.match_request(f"up{i}", info)
        assert p.flow_id == f"c{i}" and p.cap == 100 + i
    assert corr.stats["requests_matched"] == 20


def test_request_match_needs_the_last_needle():
    corr = Correlator()
    corr.note_client_request("c", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"},
                                                                         {"role": "user", "content": "zzz"}]})  # fmt: skip
    assert corr.match_request("u", read_request(upstream_request(["a", "b"]))) is None
    assert corr.match_request("u", read_request(upstream_request(["a", "xx zzz xx"]))).flow_id == "c"
    assert corr.match_request("u", read_request(upstream_request([]))) is None


def test_identical_pending_requests_prefer_unmatched_then_oldest():
    corr = Correlator()
    body = {"input": "same", "max_output_tokens": 5}
    corr.note_client_request("old", "/v1/responses", body)
    corr.note_client_request("new", "/v1/responses", body)
    info = read_request(upstream_request(["same"]))
    assert corr.match_request("u1", info).flow_id == "old"
    assert corr.match_request("u2", info).flow_id == "new"
    corr.forget_client("old")
    assert corr.match_request("u3", info).flow_id == "new"


@pytest.mark.parametrize("body", [None, [], {"input": []}, {"messages": "x"}])
def test_note_ignores_requests_without_text(body):
    corr = Correlator()
    assert corr.note_client_request("c", "/v1/responses", body) is None
    assert not corr.pending


def test_digest_miss_falls_back_to_an_unambiguous_request_link():
    """A client leg that saw the content differently (a non-streamed body whose repairer
    reports no deltas, a UTF-8 character split across frames) still gets its StopReason
    through the request-side link; an ambiguous link is not used."""
    corr = Correlator()
    corr.note_client_request("c-mine", "/v1/responses", {"input": "unique prompt one"})
    corr.note_client_request("c-a", "/v1/responses", {"input": "same prompt"})
    corr.note_client_request("c-b", "/v1/responses", {"input": "same prompt"})
    for up, prompt in (("up-mine", "unique prompt one"), ("up-same", "same prompt")):
        p = corr.match_request(up, read_request(upstream_request([prompt])))
        corr.upstream_started(up, p.flow_id, link_ambiguous=p.last_match_ambiguous)
        tap = DevinTap()
        tap.feed(frame(text=b"generated text", stop_reason=3) + encode_end_stream())
        corr.upstream_finished(up, tap.result())
    assert corr.records["up-same"].link_ambiguous and not corr.records["up-mine"].link_ambiguous
    v = Verdict()
    v.observe_text("the client saw something else")
    v.resolver = r = corr.resolver("c-mine")
    d = v.decide()
    assert d.outcome == "max_tokens" and r.record.flow_id == "up-mine" and r.record.by_link
    assert d.evidence[0].detail == "Devin StopReason 3 MAX_TOKENS, matched by prompt (content digest differs)"
    v = Verdict()
    v.observe_text("also different")
    v.resolver = r = corr.resolver(corr.records["up-same"].client_flow_id)
    v.decide()
    assert r.record is None  # linked, but the link was a tie between c-a and c-b
    assert corr.stats["by_link"] == 1


def test_a_flows_own_link_wins_over_another_flows_record_with_its_digest():
    own_link_before_anothers_digest(Correlator())


def test_link_fallback_takes_the_latest_finished_record_of_a_retry():
    now = [0.0]
    corr = Correlator(clock=lambda: now[0])
    for up, trailer in (("first", encode_end_stream("unavailable", "retry")), ("retry", encode_end_stream())):
        corr.upstream_started(up, "c")
        tap = DevinTap()
        tap.feed(frame(text=b"t", stop_reason=11) + trailer)
        now[0] += 1
        corr.upstream_finished(up, tap.result())
    v = Verdict()
    v.observe_text("x")
    v.resolver = r = corr.resolver("c")
    assert v.decide().outcome == "content_filter" and r.record.flow_id == "retry"


def test_resolver_looks_again_while_the_linked_upstream_call_is_open():
    """A gateway that writes the client's terminal before it read Devin's trailer (CPA PR
    #5111 writes the finish chunk on the StopReason frame): the first look finds the
    linked call still open, so the resolver re-arms itself; once the trailer passed, the
    next decide() matches it."""
    corr = Correlator()
    p = corr.note_client_request("c", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "write it [conv:x]"}]})  # fmt: skip
    assert corr.match_request("up", read_request(upstream_request(["write it [conv:x]"]))) is p
    corr.upstream_started("up", p.flow_id)
    tap = DevinTap()
    tap.feed(frame(text=b"I cannot", stop_reason=11))
    v = Verdict()
    v.observe_text("I cannot")
    v.resolver = r = corr.resolver("c")
    assert v.decide().outcome == "unknown" and r.waiting and v.resolver is r and r.record is None
    assert "c" in corr.pending and corr.stats["unresolved"] == 0
    tap.feed(encode_end_stream())
    corr.upstream_finished("up", tap.result())
    d = v.decide()
    assert d.outcome == "content_filter" and r.record.flow_id == "up" and not r.waiting and v.resolver is None


def test_resolver_without_an_open_linked_call_looks_once():
    corr = Correlator()
    corr.upstream_started("other", "someone-else")  # open, but linked to another client flow
    v = Verdict()
    v.observe_text("x")
    v.resolver = r = corr.resolver("c")
    v.decide()
    assert not r.waiting and v.resolver is None and corr.stats["unresolved"] == 1


def test_resolver_gives_up_after_its_retries():
    corr = Correlator()
    corr.upstream_started("up", "c")  # never finishes
    v = Verdict()
    v.observe_text("x")
    v.resolver = r = corr.resolver("c")
    for _ in range(10):
        v.decide()
    assert r.tries == r.RETRIES + 1 and not r.waiting and v.resolver is None


def test_an_open_linked_call_wins_over_an_older_record_with_the_same_digest():
    """Two identical outputs: an older unlinked record (a call that never went through the
    client leg) and this client's own call, still open at the client's terminal. The
    resolver waits for its own instead of taking the stale one."""
    corr = Correlator()
    body = frame(text=b"same words", stop_reason=3) + encode_end_stream()
    corr.upstream_started("stale", None)
    t = DevinTap()
    t.feed(body)
    corr.upstream_finished("stale", t.result())
    corr.upstream_started("mine", "c")
    v = Verdict()
    v.observe_text("same words")
    v.resolver = r = corr.resolver("c")
    v.decide()
    assert r.waiting and corr.records["stale"].claimed_by is None
    t = DevinTap()
    t.feed(body)
    corr.upstream_finished("mine", t.result())
    v.decide()
    assert r.record.flow_id == "mine" and corr.records["stale"].claimed_by is None
