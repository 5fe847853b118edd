"""Latency, capacity and memory under many concurrent model-paced streams.

    python -m streamfix.bench.capacity            # `just bench --capacity`; a few minutes
    python -m streamfix.bench.capacity --quick    # a smoke run

Three targets against the same upstream, one after the other: the upstream directly,
mitmdump with ``stream = True`` (:mod:`streamfix.bench.addon`) and mitmdump with
``addons/repair.py``. The upstream (``--serve``, its own process) answers with a
Devin-style ``/v1/responses`` turn (:func:`streamfix.bench.streams.turn_stream`), one
event per chunk, ``--pace-ms`` apart, and keeps when it sent each delta; the client
(asyncio, in this process) asks for those times after the stream, so a delta's latency
is its arrival minus its send (``--stamped``: every event timed by a key in its JSON,
which defeats skimming: the worst case). Reported per target and concurrency: p50 and p99
per event, the latency each proxy adds, and capacity: the most streams at 50 events/s
whose median p99 added latency stays under 50 ms, over ``--trials`` rotating trials.
Memory: RSS around 2,000 client aborts. Figures compare only within one run
(docs/benchmarks.md says how to read them).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..procs import ROOT, Proc
from . import mitm, streams
from .report import machine

LEVELS = (1, 50, 100, 200)
LADDER = (5, 10, 20, 30, 40, 50, 60, 75, 100, 125, 150, 200, 300)
"""Concurrencies tried for capacity, in order; the ladder stops at the first rung where
both proxies are over the budget (more streams only add latency)."""
BUDGET_MS = 50.0
TRIALS = 3
"""Measurements of each concurrency per target, in rotating order; a row is their median
(:func:`combine`)."""
TARGETS = ("direct", "passthrough", "addon")
_STAMP = re.compile(rb'"x_t":(\d+),')


# --- the timed upstream ---------------------------------------------------------------
def upstream_events() -> list[bytes]:
    return streams.events_of(streams.turn_stream())


_DELTA = re.compile(rb'"type":"response\.[a-z_]+\.delta"')
"""A delta event's type in its JSON (the repairer never adds, reorders or drops a delta
of this turn: the k-th delta out is the k-th delta sent)."""
SENT: dict[bytes, list[int]] = {}
"""The upstream's send times (CLOCK_MONOTONIC ns) of each stream's deltas, by the
stream's ``x-stream`` id, until the client fetches them (``GET /sent/<id>``)."""


def _length(head: bytes) -> int | None:
    """The ``content-length`` of an HTTP/1.1 head, if it has one."""
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    return int(m.group(1)) if m else None


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, events: list[bytes], pace: float):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET /sent/"):  # a stream's send times, as JSON, once
            sid = head[10 : head.index(b" ", 10)]
            body = json.dumps(SENT.pop(sid, [])).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            return
        length = _length(head)
        if length is not None:
            await reader.readexactly(length)
        m = re.search(rb"(?i)\r\nx-pace-ms:\s*([\d.]+)", head)  # the aborts run faster
        if m:
            pace = float(m.group(1)) / 1000
        m = re.search(rb"(?i)\r\nx-stream:\s*(\S+)", head)
        sent = SENT.setdefault(m.group(1), []) if m else None
        stamp = re.search(rb"(?i)\r\nx-stamp:\s*json", head) is not None
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"connection: close\r\n\r\n"
        )
        for i, ev in enumerate(events):
            if i:
                await asyncio.sleep(pace)
            if stamp:  # the send time in the event's JSON: every event a new layout
                head, brace, rest = ev.partition(b"data: {")
                data = head + brace + b'"x_t":%d,' % time.monotonic_ns() + rest if brace else ev
            else:  # the event as CPA sends it, its send time kept here
                data = ev
                if sent is not None and _DELTA.search(ev):
                    sent.append(time.monotonic_ns())
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _serve(port: int, pace_ms: float) -> None:
    events = upstream_events()
    server = await asyncio.start_server(
        lambda r, w: _answer(r, w, events, pace_ms / 1000), "127.0.0.1", port, backlog=1024
    )
    print(f"capacity upstream listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


# --- the client -----------------------------------------------------------------------
REQUEST = b'{"model":"devin/swe-2","stream":true,"input":[{"role":"user","content":"Build the page."}]}'


def _request(pace_ms: float | None = None, sid: str = "", stamped: bool = False) -> bytes:
    pace = b"x-pace-ms: %g\r\n" % pace_ms if pace_ms is not None else b""
    extra = (b"x-stream: %s\r\n" % sid.encode() if sid else b"") + (b"x-stamp: json\r\n" if stamped else b"")
    return (
        b"POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"accept-encoding: identity\r\nconnection: close\r\n%s%scontent-length: %d\r\n\r\n"
        % (pace, extra, len(REQUEST))
    ) + REQUEST


_ids = itertools.count()


async def _sent(upstream: int, sid: str) -> list[int]:
    """The upstream's send times of stream ``sid``'s deltas (asked of it directly)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", upstream)
    try:
        writer.write(b"GET /sent/%s HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" % sid.encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = _length(head)
        if length is None:
            raise RuntimeError(f"the upstream's send times came without a length: {head!r}")
        times: list[int] = json.loads(await reader.readexactly(length))
        return times
    finally:
        writer.close()


async def _one_stream(port: int, delay: float, lat: list[float], upstream: int, stamped: bool) -> int:
    """One streamed request; appends each upstream event's latency (ms): arrival minus
    send, the send time read from the event's stamp (``stamped``) or, for each delta, from
    the upstream's record of the stream; returns how many were timed."""
    await asyncio.sleep(delay)
    sid = f"{os.getpid()}-{next(_ids)}"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    arrived: list[int] = []
    tail = b""
    pattern = _STAMP if stamped else _DELTA
    try:
        writer.write(_request(sid="" if stamped else sid, stamped=stamped))
        await writer.drain()
        while True:
            chunk = await reader.read(65536)
            now = time.monotonic_ns()
            if not chunk:
                break
            data = tail + chunk
            end = 0
            for m in pattern.finditer(data):
                arrived.append(now - int(m.group(1)) if stamped else now)
                end = m.end()
            tail = data[max(end, len(data) - 64) :]
    finally:
        writer.close()
    if stamped:
        lat.extend(d / 1e6 for d in arrived)
        return len(arrived)
    sent = await _sent(upstream, sid)
    if len(sent) != len(arrived):
        raise RuntimeError(f"stream {sid}: {len(sent)} deltas sent, {len(arrived)} received")
    lat.extend((a - t) / 1e6 for a, t in zip(arrived, sent))
    return len(arrived)


async def load(
    port: int, streams: int, pace_ms: float, upstream: int, stamped: bool = False
) -> tuple[list[float], int]:
    lat: list[float] = []
    counts = await asyncio.gather(
        *(_one_stream(port, random.uniform(0, pace_ms / 1000), lat, upstream, stamped) for _ in range(streams))
    )
    return lat, sum(counts)


async def _abort(port: int, rng: random.Random) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_request(pace_ms=1))
        await writer.drain()
        want = rng.randrange(0, 20000)
        got = 0
        while got < want:
            chunk = await asyncio.wait_for(reader.read(4096), 30)
            if not chunk:
                break
            got += len(chunk)
    finally:
        if rng.random() < 0.5:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()


async def _aborts(port: int, n: int, seed: int = 5) -> None:
    rng = random.Random(seed)
    for start in range(0, n, 50):
        await asyncio.gather(*(_abort(port, rng) for _ in range(min(50, n - start))))


# --- running it -------------------------------------------------------------------------
def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def combine(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """One concurrency's trials (each: target -> p50, p99, events, seconds, cpu_us) as
    one row: per target the median of each figure over the trials; for each proxy the
    *added* p50 and p99 (its percentile minus the direct one of the same trial), as the
    median over the trials and the lowest and highest of them (``added_p99_lo``/``_hi``).
    One trial's stall (a full garbage collection pauses a mitmdump for 40-70 ms under
    100 streams) then moves the rung's figure only if it comes in most of its trials."""
    row: dict[str, dict[str, float]] = {}
    for label in runs[0]:
        row[label] = {k: statistics.median(r[label][k] for r in runs) for k in runs[0][label]}
    for label in TARGETS[1:]:
        for q in ("p50", "p99"):
            added = [r[label][q] - r["direct"][q] for r in runs]
            row[label][f"added_{q}"] = statistics.median(added)
            row[label][f"added_{q}_lo"], row[label][f"added_{q}_hi"] = min(added), max(added)
    return row


def run(
    quick: bool = False, pace_ms: float = 20.0, aborts: int = 2000, stamped: bool = False, trials: int | None = None
) -> dict[str, Any]:
    levels = (1, 50) if quick else LEVELS
    ladder = (5, 25) if quick else LADDER
    aborts = 200 if quick else aborts
    trials = max(1, trials if trials is not None else 1 if quick else TRIALS)
    out: dict[str, Any] = {
        "levels": {}, "ladder": {}, "rss": {}, "pace_ms": pace_ms, "aborts": aborts, "stamped": stamped, "trials": trials
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="streamfix-capacity-") as tmp:
        tmpd = Path(tmp)
        procs: list[Proc] = []
        try:
            up = mitm.bench_proc(
                [sys.executable, "-m", "streamfix.bench.capacity", "--serve", "--pace-ms", str(pace_ms)],
                tmpd / "up.log",
            )
            procs.append(up)
            upstream = up.wait_for(r"listening on (http://\S+)").group(1)
            ports = {"direct": int(upstream.rsplit(":", 1)[1])}
            pids = {}
            for label, addon in (
                ("passthrough", mitm.ADDON),
                ("addon", ROOT / "addons" / "repair.py"),
            ):
                p, ports[label] = mitm.start_proxy(upstream, addon, tmpd, label, procs)
                pids[label] = p.p.pid
            for port in ports.values():  # warm-up
                asyncio.run(load(port, 2, pace_ms, ports["direct"], stamped))

            per_stream = len(upstream_events())  # upstream events each stream sends

            def measure(n: int) -> dict[str, dict[str, float]]:
                runs = []
                for t in range(trials):
                    k = t % len(TARGETS)
                    order = TARGETS[k:] + TARGETS[:k]  # no target always first
                    one: dict[str, dict[str, float]] = {}
                    for label in order:
                        t0 = time.monotonic()
                        c0 = mitm.cpu_seconds(pids[label]) if label in pids else 0.0
                        lat, events = asyncio.run(load(ports[label], n, pace_ms, ports["direct"], stamped))
                        cpu = mitm.cpu_seconds(pids[label]) - c0 if label in pids else 0.0
                        one[label] = {
                            "p50": pct(lat, 0.5),
                            "p99": pct(lat, 0.99),
                            "events": events,
                            "seconds": time.monotonic() - t0,
                            # per upstream event, timed or not (each stream sends the whole turn)
                            "cpu_us": cpu / max(n * per_stream, 1) * 1e6,
                        }
                    runs.append(one)
                return combine(runs)

            for n in levels:
                out["levels"][n] = measure(n)
                print(f"  {n} streams: {_fmt_row(out['levels'][n])}", file=sys.stderr, flush=True)
            for n in ladder:
                row = out["ladder"][n] = out["levels"].get(n) or measure(n)
                print(f"  ladder {n}: {_fmt_row(row)}", file=sys.stderr, flush=True)
                if all(row[label]["added_p99"] >= BUDGET_MS for label in ("passthrough", "addon")):
                    break
            for label in ("passthrough", "addon"):
                before = _rss_kb(pids[label])
                asyncio.run(_aborts(ports[label], max(200, aborts // 10)))  # warm the pools up
                mid = _rss_kb(pids[label])
                asyncio.run(_aborts(ports[label], aborts))
                time.sleep(1)
                out["rss"][label] = {"start": before, "warm": mid, "after": _rss_kb(pids[label])}
            alive = {label: procs[i + 1].p.poll() is None for i, label in enumerate(("passthrough", "addon"))}
            out["alive"] = alive
        finally:
            for p in reversed(procs):
                p.stop()
    for label in ("passthrough", "addon"):
        ok = [n for n, row in out["ladder"].items() if row[label]["added_p99"] < BUDGET_MS]
        out.setdefault("capacity", {})[label] = max(ok) if ok else 0
    return out


def _fmt_row(row: dict[str, dict[str, float]]) -> str:
    return "; ".join(
        f"{k} p50 {v['p50']:.1f} p99 {v['p99']:.1f} ms" + (f" (+{v['added_p99']:.1f})" if "added_p99" in v else "")
        for k, v in row.items()
    )


def report(r: dict[str, Any]) -> str:
    m = machine()
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"model-paced streams: one event per chunk, {r['pace_ms']:g} ms apart ({1000 / r['pace_ms']:g} events/s); "
        + (
            "every event stamped with its send time in its JSON (a new layout each: nothing skimmed)"
            if r["stamped"]
            else "the events as CPA sends them, each delta's send time kept by the upstream"
        ),
        "",
        "latency per event, ms (added = the proxy's percentile minus direct's at the same concurrency)",
        (
            "| streams | direct p50 | direct p99 | passthrough p50 | passthrough p99 | addon p50 | addon p99 | "
            "added p50 pass / addon | added p99 pass / addon |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in r["levels"].items():
        d, p, a = row["direct"], row["passthrough"], row["addon"]
        lines.append(
            f"| {n} | {d['p50']:.1f} | {d['p99']:.1f} | {p['p50']:.1f} | {p['p99']:.1f} | {a['p50']:.1f} | "
            f"{a['p99']:.1f} | {p['added_p50']:+.1f} / {a['added_p50']:+.1f} | {p['added_p99']:+.1f} / {a['added_p99']:+.1f} |"
        )
    trials = r["trials"]
    lines += [
        "",
        f"capacity ladder: p99 added latency (ms) per concurrency; budget {BUDGET_MS:g} ms"
        + (f"; the median of {trials} trials, lowest..highest below it" if trials > 1 else ""),
    ]
    lines.append("| streams | " + " | ".join(str(n) for n in r["ladder"]) + " |")
    lines.append("|---|" + "---:|" * len(r["ladder"]))
    for label in ("passthrough", "addon"):
        lines.append(
            f"| {label} | " + " | ".join(f"{row[label]['added_p99']:+.1f}" for row in r["ladder"].values()) + " |"
        )
        if trials > 1:
            lines.append(
                "| | "
                + " | ".join(
                    f"{row[label]['added_p99_lo']:.0f}..{row[label]['added_p99_hi']:.0f}"
                    for row in r["ladder"].values()
                )
                + " |"
            )
    lines += [
        "",
        (
            "mitmdump CPU (utime+stime) per upstream event, µs, and what it gives: streams one core carries at "
            f"{1000 / r['pace_ms']:g} events/s if the proxy had the core to itself"
        ),
        "| streams | passthrough µs/ev | addon µs/ev | addon/passthrough | streams/core passthrough | streams/core addon |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    rate = 1000 / r["pace_ms"]
    for n, row in r["levels"].items():
        p, a = row["passthrough"]["cpu_us"], row["addon"]["cpu_us"]
        lines.append(
            f"| {n} | {p:.0f} | {a:.0f} | {a / p if p else float('nan'):.2f} | "
            f"{1e6 / (p * rate) if p else float('nan'):.0f} | {1e6 / (a * rate) if a else float('nan'):.0f} |"
        )
    cap = r["capacity"]
    ratio = cap["addon"] / cap["passthrough"] if cap["passthrough"] else float("nan")
    lines += [
        "",
        (
            f"capacity (most streams with p99 added < {BUDGET_MS:g} ms): addon {cap['addon']}, "
            f"passthrough {cap['passthrough']}, ratio {ratio:.2f}"
        ),
        "",
        f"RSS over {r['aborts']} client aborts (kB): "
        + "; ".join(
            f"{label} start {v['start']}, after warm-up {v['warm']}, after {v['after']} "
            f"({(v['after'] - v['warm']) / 1024:+.1f} MB)"
            for label, v in r["rss"].items()
        ),
        f"both proxies alive at the end: {all(r['alive'].values())}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.capacity", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 and 50 streams, a short ladder, 200 aborts")
    ap.add_argument("--pace-ms", type=float, default=20.0, help="pause between a stream's events (default 20)")
    ap.add_argument("--aborts", type=int, default=2000)
    ap.add_argument(
        "--trials",
        type=int,
        help=f"measurements of each concurrency per target, their median reported (default {TRIALS}, with --quick 1)",
    )
    ap.add_argument(
        "--stamped",
        action="store_true",
        help="the send time in each event's JSON (a key no repairer knows: every event a new layout, "
        "the worst case for skimming) instead of kept by the upstream",
    )
    ap.add_argument("--serve", action="store_true", help="run the timed upstream (used by the benchmark)")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    if a.serve:
        try:
            asyncio.run(_serve(a.port, a.pace_ms))
        except KeyboardInterrupt:
            pass
        return 0
    t0 = time.monotonic()
    r = run(quick=a.quick, pace_ms=a.pace_ms, aborts=a.aborts, stamped=a.stamped, trials=a.trials)
    print(report(r))
    print(f"\n(capacity benchmark took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
