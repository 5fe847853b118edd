"""The capacity ladder of one and two streamfix workers, and of two passthrough workers
behind the same balancer, side by side in one run.

    python -m streamfix.bench.capacity_workers            # `just bench --workers`; 10-20 minutes here
    python -m streamfix.bench.capacity_workers --quick    # a smoke run

The same method as ``streamfix.bench.capacity`` (its timed upstream, its client, its
concurrency ladder and budget: p99 added latency under 50 ms at 50 events/s per stream,
each rung measured ``--trials`` times per target in rotating order, the median kept),
with these targets against one upstream:

* ``direct``: the upstream itself (the baseline every *added* latency is measured from);
* ``streamfix x1``: one mitmdump with the repair addon, as ``streamfix sidecar`` runs it
  with one worker (no balancer);
* ``streamfix x2``: ``streamfix sidecar --workers 2`` itself: HAProxy (configured by the
  launcher) in front of two workers;
* ``passthrough x2``: two mitmdumps with ``stream = True`` (``streamfix/bench/addon.py``)
  behind HAProxy configured the same way (``streamfix.workers.haproxy_config``, without
  the health checks they cannot answer): the floor of two workers.

CPU per upstream event is summed over a target's processes (workers and HAProxy). The
client, the upstream and the proxies share the machine: on 2 cores, two workers and the
load generator compete for the same 2 cores, so what the ladder shows is what this
machine gives, and ``docs/scaling.md`` says how to read it for a larger one.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..procs import ROOT, Proc, free_port
from . import capacity, mitm
from .report import machine

TARGETS = ("direct", "streamfix x1", "streamfix x2", "passthrough x2")
PROXIES = TARGETS[1:]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _start_workers(upstream: str, tmpd: Path, procs: list[Proc]) -> tuple[int, list[int]]:
    """``streamfix sidecar --workers 2`` in front of ``upstream``: (client port, pids of
    its workers and HAProxy)."""
    port = free_port()
    p = mitm.bench_proc(
        [sys.executable, "-m", "streamfix.sidecar", "--workers", "2", "--upstream", upstream,
         "--listen", f"127.0.0.1:{port}", "--", "--set", f"confdir={tmpd / 'conf'}", "--set", "flow_detail=0"],
        tmpd / "workers.log",
    )  # fmt: skip
    procs.append(p)
    p.wait_for(r"streamfix: worker 2 \(pid (\d+)\)", 120)
    pids = [int(x) for x in re.findall(r"streamfix: worker \d+ \(pid (\d+)\)", p.output)]
    pids += [c for c in _children(p.p.pid) if _comm(c) == "haproxy"]
    return port, pids


def _start_passthrough_pair(upstream: str, tmpd: Path, procs: list[Proc]) -> tuple[int, list[int]]:
    """Two passthrough mitmdumps behind HAProxy with the launcher's configuration."""
    from ..workers import Worker, haproxy_config

    pids, workers = [], []
    for i in (1, 2):
        p, port = mitm.start_proxy(upstream, mitm.ADDON, tmpd, f"pass{i}", procs)
        pids.append(p.p.pid)
        workers.append(Worker(i, port, None, 0))
    listen = free_port()
    cfg = tmpd / "haproxy-pass.cfg"
    cfg.write_text(haproxy_config(workers, f"127.0.0.1:{listen}", None, tmpd / "haproxy-pass.sock", checks=False))
    h = mitm.bench_proc([shutil.which("haproxy") or "haproxy", "-db", "-f", str(cfg)], tmpd / "haproxy-pass.log")
    procs.append(h)
    deadline = time.monotonic() + 30
    import socket

    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", listen)) == 0:
                break
        time.sleep(0.05)
    pids.append(h.p.pid)
    return listen, pids


def run(quick: bool = False, pace_ms: float = 20.0, trials: int | None = None) -> dict[str, Any]:
    ladder = (5, 25, 50) if quick else capacity.LADDER
    trials = max(1, trials if trials is not None else 1 if quick else capacity.TRIALS)
    out: dict[str, Any] = {"ladder": {}, "pace_ms": pace_ms, "trials": trials, "load": []}
    with tempfile.TemporaryDirectory(prefix="streamfix-capacity-workers-") as tmp:
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
            pids: dict[str, list[int]] = {"direct": []}
            p1, ports["streamfix x1"] = mitm.start_proxy(upstream, ROOT / "addons" / "repair.py", tmpd, "x1", procs)
            pids["streamfix x1"] = [p1.p.pid]
            ports["streamfix x2"], pids["streamfix x2"] = _start_workers(upstream, tmpd, procs)
            ports["passthrough x2"], pids["passthrough x2"] = _start_passthrough_pair(upstream, tmpd, procs)
            for port in ports.values():  # warm-up
                asyncio.run(capacity.load(port, 4, pace_ms, ports["direct"]))
            per_stream = len(capacity.upstream_events())
            balancers = {p for ps in pids.values() for p in ps if _comm(p) == "haproxy"}

            def measure(n: int) -> dict[str, dict[str, float]]:
                runs = []
                for t in range(trials):
                    k = t % len(TARGETS)
                    order = TARGETS[k:] + TARGETS[:k]
                    one: dict[str, dict[str, float]] = {}
                    for label in order:
                        c0 = [mitm.cpu_seconds(p) for p in pids[label]]
                        lat, events = asyncio.run(capacity.load(ports[label], n, pace_ms, ports["direct"]))
                        cpu = [mitm.cpu_seconds(p) - c for p, c in zip(pids[label], c0)]
                        per = max(n * per_stream, 1)
                        lb = sum(c for p, c in zip(pids[label], cpu) if p in balancers) / per * 1e6
                        one[label] = {"p50": capacity.pct(lat, 0.5), "p99": capacity.pct(lat, 0.99),
                                      "events": events, "cpu_us": sum(cpu) / per * 1e6, "lb_us": lb}  # fmt: skip
                    runs.append(one)
                row: dict[str, dict[str, float]] = {}
                for label in TARGETS:
                    row[label] = {k: statistics.median(r[label][k] for r in runs) for k in runs[0][label]}
                for label in PROXIES:
                    added = [r[label]["p99"] - r["direct"]["p99"] for r in runs]
                    row[label]["added_p99"] = statistics.median(added)
                    row[label]["added_p99_lo"], row[label]["added_p99_hi"] = min(added), max(added)
                return row

            for n in ladder:
                out["load"].append(_loadavg())
                row = out["ladder"][n] = measure(n)
                print(f"  ladder {n}: " + "; ".join(f"{k} +{row[k]['added_p99']:.1f}" for k in PROXIES),
                      file=sys.stderr, flush=True)  # fmt: skip
                if all(row[k]["added_p99"] >= capacity.BUDGET_MS for k in PROXIES):
                    break
        finally:
            for p in reversed(procs):
                p.stop()
    out["capacity"] = {}
    for label in PROXIES:
        ok = [n for n, row in out["ladder"].items() if row[label]["added_p99"] < capacity.BUDGET_MS]
        out["capacity"][label] = max(ok) if ok else 0
    return out


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError):
        return float("nan")


def report(r: dict[str, Any]) -> str:
    m = machine()
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"load average at each rung: {', '.join(f'{x:.2f}' for x in r['load'])}",
        f"model-paced streams: one event per chunk, {r['pace_ms']:g} ms apart; median of {r['trials']} trials per rung",
        "",
        f"capacity ladder: p99 added latency (ms; lowest..highest trial); budget {capacity.BUDGET_MS:g} ms",
        "| streams | " + " | ".join(str(n) for n in r["ladder"]) + " |",
        "|---|" + "---:|" * len(r["ladder"]),
    ]
    for label in PROXIES:
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"{row[label]['added_p99']:+.1f} ({row[label]['added_p99_lo']:.0f}..{row[label]['added_p99_hi']:.0f})"
                for row in r["ladder"].values()
            )
            + " |"
        )
    title = "CPU per upstream event (µs, all of a target's processes: workers and HAProxy; HAProxy's share in ())"
    lines += ["", title, "| streams | " + " | ".join(PROXIES) + " |", "|---:|" + "---:|" * len(PROXIES)]

    def cell(v: dict[str, float]) -> str:
        return f"{v['cpu_us']:.0f}" + (f" ({v['lb_us']:.0f})" if v["lb_us"] else "")

    for n, row in r["ladder"].items():
        lines.append(f"| {n} | " + " | ".join(cell(row[k]) for k in PROXIES) + " |")
    cap = r["capacity"]
    one, two, floor = cap["streamfix x1"], cap["streamfix x2"], cap["passthrough x2"]
    lines += [
        "",
        (
            f"capacity (most streams with p99 added < {capacity.BUDGET_MS:g} ms): streamfix x1 {one}, "
            f"streamfix x2 {two}, passthrough x2 {floor}; x2 / x1 {two / one if one else float('nan'):.2f}, "
            f"x2 / passthrough x2 {two / floor if floor else float('nan'):.2f}"
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.capacity_workers", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short ladder, one trial per rung")
    ap.add_argument("--pace-ms", type=float, default=20.0)
    ap.add_argument("--trials", type=int, help=f"trials per rung and target (default {capacity.TRIALS})")
    a = ap.parse_args(argv)
    if shutil.which("haproxy") is None:
        print("streamfix: the workers' benchmark needs haproxy (scripts/install-balancer)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    r = run(quick=a.quick, pace_ms=a.pace_ms, trials=a.trials)
    print(report(r))
    print(f"\n(took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
