"""streamfix/bench/capacity.py's clock: the latency of every timed upstream event is measured,
the send times kept by the upstream line up with the deltas received, and a stamped
stream times its events from their JSON. Against the timed upstream itself (the direct
target), in process; the proxies are the benchmark's business."""

from __future__ import annotations

import asyncio

import pytest

from streamfix.bench import capacity


async def _served(pace_ms: float, streams: int, stamped: bool) -> tuple[list[float], int]:
    events = capacity.upstream_events()
    server = await asyncio.start_server(lambda r, w: capacity._answer(r, w, events, pace_ms / 1000), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await capacity.load(port, streams, pace_ms, port, stamped)


def test_every_delta_is_timed_by_the_send_times_the_upstream_kept():
    events = capacity.upstream_events()
    deltas = [e for e in events if capacity._DELTA.search(e)]
    # the turn's builder: 20 reasoning, 40 text, 60 + 30 argument deltas; 166 events in all
    assert (len(deltas), len(events)) == (20 + 40 + 60 + 30, 166)
    lat, n = asyncio.run(_served(0.5, 3, stamped=False))
    assert n == len(lat) == 3 * len(deltas)
    assert all(0 <= x < 1000 for x in lat)
    assert not capacity.SENT  # each stream's record fetched, and let go


def test_a_stamped_stream_times_every_event_with_json_from_its_stamp():
    events = capacity.upstream_events()
    with_json = [e for e in events if b"data: {" in e]
    assert len(with_json) == 165  # all but the body's extra trailing LF, an event of its own
    lat, n = asyncio.run(_served(0.5, 2, stamped=True))
    assert n == len(lat) == 2 * len(with_json)
    assert all(0 <= x < 1000 for x in lat)


def test_a_count_that_does_not_line_up_is_an_error(monkeypatch):
    """A delta lost (or one too many) between upstream and client would pair every later
    send time with the wrong arrival: the client refuses the stream instead."""
    real = capacity._sent

    async def one_short(upstream, sid):
        return (await real(upstream, sid))[:-1]

    monkeypatch.setattr(capacity, "_sent", one_short)
    with pytest.raises(RuntimeError, match="deltas sent"):
        asyncio.run(_served(0.5, 1, stamped=False))


def _trial(direct: float, passthrough: float, addon: float) -> dict[str, dict[str, float]]:
    """One trial's p99s (the other figures fixed: they are combined the same way)."""
    return {
        label: {"p50": 1.0, "p99": p99, "events": 100, "seconds": 3.0, "cpu_us": cpu}
        for label, p99, cpu in (("direct", direct, 0.0), ("passthrough", passthrough, 120.0), ("addon", addon, 140.0))
    }


def test_a_rung_is_the_median_of_its_trials_so_one_stall_does_not_decide_it():
    # trial 1: the addon's mitmdump paused (a full collection); trial 3: passthrough's
    row = capacity.combine([_trial(2, 10, 70), _trial(3, 13, 23), _trial(4, 30, 29)])
    assert row["direct"]["p99"] == 3
    assert (row["passthrough"]["p99"], row["addon"]["p99"]) == (13, 29)
    # added per trial, each against its own trial's direct: passthrough 8, 10, 26; addon 68, 20, 25
    p, a = row["passthrough"], row["addon"]
    assert (p["added_p99"], p["added_p99_lo"], p["added_p99_hi"]) == (10, 8, 26)
    assert (a["added_p99"], a["added_p99_lo"], a["added_p99_hi"]) == (25, 20, 68)
    assert (p["added_p50"], a["added_p50"]) == (0, 0)
    assert (p["cpu_us"], a["cpu_us"]) == (120, 140)


def test_one_trial_is_that_trial():
    row = capacity.combine([_trial(2, 10, 70)])
    assert (row["passthrough"]["added_p99"], row["addon"]["added_p99"]) == (8, 68)
    assert row["addon"]["added_p99_lo"] == row["addon"]["added_p99_hi"] == 68
