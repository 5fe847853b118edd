"""Benchmark (a), in process: the repairer against the least any event-level repair must do.

``StreamRepair`` around the API's repairer, one event per chunk as CPA writes them,
against splitting the stream into events (:class:`wire.sse.SseParser`) and one
``orjson.loads`` per event; medians of repeated runs, as a ratio (so the figure does not
depend on the machine's speed or load).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import orjson

from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from .streams import STREAMS, events_of


def repair_in_process(
    api: str, request: dict[str, Any], chunks: Sequence[bytes], rules: Rules | None = None
) -> tuple[bytes, StreamRepair]:
    """What the addon does to one streamed flow, without mitmproxy (same defaults)."""
    from streamfix.wire.apis import stream_repairer

    verdict = Verdict()
    verdict.request(request)
    model = request.get("model")
    fctx = FlowContext(model=model if isinstance(model, str) else None, request=request)
    s = StreamRepair(stream_repairer(api, rules or Rules(), fctx, verdict))
    out = [s.feed(c) for c in chunks]
    out.append(s.close())
    return b"".join(out), s


def floor_in_process(chunks: Sequence[bytes]) -> int:
    """The floor: split into events and parse each event's JSON once."""
    p = SseParser()
    loads = orjson.loads
    n = 0
    for c in chunks:
        for ev in p.feed(c):
            d = ev.data
            if d is not None and d != b"[DONE]":
                loads(d)
            n += 1
    return n + len(p.close())


# --- (a) in process -----------------------------------------------------------------
def bench_in_process(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, (api, _path, request, build) in STREAMS.items():
        chunks = events_of(build())
        _, s = repair_in_process(api, request, chunks)  # warm-up, and a sanity check
        floor_t, rep_t = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            floor_in_process(chunks)
            floor_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            repair_in_process(api, request, chunks)
            rep_t.append(time.perf_counter() - t)
        f, r = statistics.median(floor_t), statistics.median(rep_t)
        rows.append(
            {
                "stream": name,
                "events": len(chunks),
                "bytes": sum(map(len, chunks)),
                "floor_evs": len(chunks) / f,
                "repair_evs": len(chunks) / r,
                "ratio": r / f,
                "changed": s.repairer.changed,
                "error": repr(s.error) if s.error else None,
                "floor_us": f / len(chunks) * 1e6,
                "repair_us": r / len(chunks) * 1e6,
            }
        )
    return rows
