"""Benchmarks (b) to (d), in mitmdump: the proxy's CPU and memory with the repair addon
against mitmproxy's own ``stream = True`` passthrough (:mod:`streamfix.bench.addon`).

(b) CPU (utime+stime from ``/proc/<pid>/stat``) per upstream event, the same stream from
the replay upstream through each proxy, one event per write (back to back and 1 ms
apart) and batched (16 KiB writes); (c) the same at a model's pace, 20 ms apart, every
stream at once; (d) each mitmdump's RSS around one 100,000-event Responses stream. Also
the floors between passthrough and the repair (identity callable, + SSE parse, + one
JSON parse per event). Each measurement returns its results (:class:`MitmResults`); the
processes run under :class:`streamfix.procs.Proc`.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..procs import ROOT, Proc, tool
from .inprocess import repair_in_process
from .streams import RESPONSES_REQUEST, SHORT_STREAMS, STREAMS, events_of, long_responses_stream

ADDON = Path(__file__).with_name("addon.py")
"""The passthrough's ``-s`` script (``stream = True``), the floor every figure is a ratio to."""

# --- (b) mitmdump CPU ---------------------------------------------------------------
MIN_SAMPLE_CPU = 0.25
"""Seconds of mitmdump CPU per sample: utime+stime count 10 ms ticks, so +-4 %."""
MAX_PER_SAMPLE = 40


def cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU, all threads (schedstat): precise, only used to size samples."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def cpu_split(pid: int) -> tuple[float, float]:
    """A process's CPU seconds so far, (user, system), every thread's."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime


def cpu_seconds(pid: int) -> float:
    return sum(cpu_split(pid))


def bench_proc(cmd: list[str], log: Path, env: dict[str, str] | None = None, root: Path = ROOT) -> Proc:
    """A benchmark's child process (:class:`streamfix.procs.Proc`) logging to a file, with
    ``root``'s checkout first on its path (another checkout for an A/B run) and ``env`` added."""
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return Proc(cmd, log=log, cwd=root, env={**os.environ, "PYTHONPATH": path, **(env or {})})


def start_proxy(
    upstream: str,
    addon: Path,
    tmpd: Path,
    label: str,
    procs: list[Proc],
    *args: str,
    prefix: Sequence[str] = (),
    env: dict[str, str] | None = None,
    root: Path = ROOT,
    timeout: float = 30.0,
    regular: bool = False,
) -> tuple[Proc, int]:
    """mitmdump in reverse mode in front of ``upstream`` (``regular``: a regular proxy, as
    CPA's ``proxy-url`` uses it) with one addon script (and ``args``), logging to
    ``tmpd/mitm-<label>.log`` (added to ``procs`` for the caller to stop): (process, port).
    ``prefix`` runs it under another program (valgrind), ``env`` adds variables, ``root``
    is the checkout it imports."""
    p = bench_proc(
        [
            *prefix,
            tool("mitmdump"),
            "--mode",
            "regular@127.0.0.1:0" if regular else f"reverse:{upstream}@127.0.0.1:0",
            "--set",
            f"confdir={tmpd / 'conf'}",
            "--set",
            "flow_detail=0",
            "-s",
            str(addon),
            *args,
        ],
        tmpd / f"mitm-{label}.log",
        env,
        root,
    )
    procs.append(p)
    port = int(p.wait_for(r"listening at 127\.0\.0\.1:(\d+)", timeout).group(1))
    if "error in script" in p.output:
        raise RuntimeError(f"{addon} failed to load:\n{p.output}")
    return p, port


def write_recordings(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Bench recordings for the replay upstream: name -> (path, body, events)."""
    out = {}
    for name, (api, path, request, build) in {**STREAMS, **SHORT_STREAMS}.items():
        body = build()
        for mode, chunk in (("event", "event"), ("batched", "bytes:16384")):
            rec = root / f"bench-{name}-{mode}"
            rec.mkdir(parents=True)
            (rec / "response.body").write_bytes(body)
            (rec / "recording.json").write_text(
                json.dumps(
                    {
                        "description": f"streamfix.bench: synthetic Devin turn on {path}, {mode} writes",
                        "api": api,
                        "kind": "buggy",
                        "source": "streamfix.bench (synthetic)",
                        "request": {
                            "method": "POST",
                            "path": path,
                            "headers": {"content-type": "application/json"},
                            "body": request,
                        },
                        "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
                        "pacing": {"delay_ms": 0, "chunk": chunk},
                    },
                    indent=1,
                )
            )
            out[rec.name] = (path, body, len(events_of(body)))
    body = long_responses_stream()
    rec = root / "bench-long-responses"
    rec.mkdir(parents=True)
    (rec / "response.body").write_bytes(body)
    (rec / "recording.json").write_text(
        json.dumps(
            {
                "description": "streamfix.bench: 100,000 text deltas into one message, for the memory figure",
                "api": "responses",
                "kind": "buggy",
                "source": "streamfix.bench (synthetic)",
                "request": {
                    "method": "POST",
                    "path": "/v1/responses",
                    "headers": {"content-type": "application/json"},
                    "body": RESPONSES_REQUEST,
                },
                "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
                "pacing": {"delay_ms": 0, "chunk": "bytes:4096"},
            }
        )
    )
    out[rec.name] = ("/v1/responses", body, len(events_of(body)))
    return out


def fetch(client: Any, url: str, body: bytes, headers: dict[str, str]) -> tuple[bytes, int]:
    """The whole streamed body and how many reads it took the client."""
    with client.stream("POST", url, content=body, headers=headers) as r:
        r.raise_for_status()
        parts = list(r.iter_raw())
    return b"".join(parts), len(parts)


MODES = (
    # label, recording suffix, upstream pause between writes (ms)
    ("1 event/write", "event", 0.0),
    ("16 KiB writes", "batched", 0.0),
    ("1 event/write, 1 ms apart", "event", 1.0),
)
"""How the upstream delivers the stream. Back to back, mitmdump still gets about one event
per read but its loop never idles; paced like a model (1 ms here, 5-50 ms in real life),
every event also pays a wake-up, which is what an LLM stream costs in practice."""


def masked(body: bytes) -> bytes:
    """created_at is the flow's start second: equal bodies may differ there only."""
    return re.sub(rb'"created_at":\d+', b'"created_at":0', body)


SLOW_PACE_MS = 20.0
"""The model-paced run at a realistic pace: every stream at once (one 2.5k-event stream
alone would take 50 s), both proxies side by side, one round."""


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _slow_paced(proxies: dict[str, Any], recs: dict[str, Any]) -> dict[str, Any]:
    """Every bench stream, one event per write 20 ms apart, all at once through each proxy
    (both proxies at the same time): mitmdump CPU per event, summed over the streams."""
    import concurrent.futures

    import httpx

    jobs = []
    for label, (proc, base) in proxies.items():
        for name, (_api, path, request, _build) in STREAMS.items():
            jobs.append((label, base + path, json.dumps(request).encode(), f"bench-{name}-event"))
    cpu0 = {label: cpu_split(proc.p.pid) for label, (proc, _) in proxies.items()}

    def one(job: tuple[str, str, bytes, str]) -> tuple[str, int]:
        label, url, body, rec = job
        headers = {
            "content-type": "application/json",
            "accept-encoding": "identity",
            "x-streamfix-recording": rec,
            "x-streamfix-delay-ms": str(SLOW_PACE_MS),
        }
        with httpx.Client(timeout=600) as client:
            got, _ = fetch(client, url, body, headers)
        return label, len(got)

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(one, jobs))
    events = sum(recs[f"bench-{name}-event"][2] for name in STREAMS)
    out: dict[str, Any] = {"streams": len(STREAMS), "events": events}
    for label, (proc, _) in proxies.items():
        # user and system time apart: the paced excess is in user time (caches, not syscalls)
        user, sys_ = (b - a for a, b in zip(cpu0[label], cpu_split(proc.p.pid)))
        out[f"{label}_us"] = (user + sys_) / events * 1e6
        out[f"{label}_user_us"], out[f"{label}_sys_us"] = user / events * 1e6, sys_ / events * 1e6
    out["ratio"] = out["repair_us"] / out["passthrough_us"] if out["passthrough_us"] else float("nan")
    return out


def _memory(proxies: dict[str, Any], recs: dict[str, Any]) -> list[dict[str, Any]]:
    """RSS of each mitmdump around one 100,000-event Responses stream: VmRSS before (after
    warm-up), peak (VmHWM) and after."""
    import httpx

    _, body, n_events = recs["bench-long-responses"]
    reqbody = json.dumps(RESPONSES_REQUEST).encode()
    rows = []
    with httpx.Client(timeout=600) as client:
        for label, (proc, base) in proxies.items():
            headers = {"content-type": "application/json", "accept-encoding": "identity", "x-streamfix-delay-ms": "0"}
            # warm-up: the small stream once, so imports and caches are in the baseline
            fetch(
                client, base + "/v1/responses", reqbody, {**headers, "x-streamfix-recording": "bench-responses-batched"}
            )
            before = rss_kb(proc.p.pid)
            # VmHWM is the peak since start: reset it (Linux >= 4.0), else it may be the warm-up's
            try:
                with open(f"/proc/{proc.p.pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
            parts: list[bytes] = []
            got_n, at90 = 0, 0
            h = {**headers, "x-streamfix-recording": "bench-long-responses"}
            with client.stream("POST", base + "/v1/responses", content=reqbody, headers=h) as r:
                for part in r.iter_raw():
                    parts.append(part)
                    got_n += len(part)
                    if not at90 and got_n >= 0.75 * len(body):  # the deltas, before the closing events
                        at90 = rss_kb(proc.p.pid)
            got = b"".join(parts)
            rows.append(
                {
                    "proxy": label,
                    "events": n_events,
                    "mb": len(body) / 1e6,
                    "before_mb": before / 1024,
                    "at90_mb": at90 / 1024,
                    "peak_mb": rss_kb(proc.p.pid, "VmHWM") / 1024,
                    "after_mb": rss_kb(proc.p.pid) / 1024,
                    "bytes_ok": len(got) >= len(body) if label == "repair" else got == body,
                }
            )
    return rows


def start_replay(tmpd: Path, procs: list[Proc]) -> str:
    """The replay upstream serving ``tmpd/recordings`` (added to ``procs``): its URL."""
    replay = bench_proc(
        [sys.executable, "-m", "streamfix.replay", "--port", "0", "--recordings", str(tmpd / "recordings")],
        tmpd / "replay.log",
    )
    procs.append(replay)
    return replay.wait_for(r"listening on (http://\S+)").group(1)


@dataclass
class MitmResults:
    """What :func:`bench_mitmdump` measured: (b) one row per stream and upstream mode, (c)
    the model-paced run (None when skipped), (d) one memory row per proxy."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    slow: dict[str, Any] | None = None
    memory: list[dict[str, Any]] = field(default_factory=list)


def bench_mitmdump(repeats: int, paced: bool = True, memory_only: bool = False) -> MitmResults:
    import httpx

    res = MitmResults()
    rows = res.rows
    with tempfile.TemporaryDirectory(prefix="streamfix-bench-") as tmp:
        tmpd = Path(tmp)
        recs = write_recordings(tmpd / "recordings")
        procs: list[Proc] = []
        try:
            upstream = start_replay(tmpd, procs)
            proxies = {}
            for label, addon in (
                ("repair", ROOT / "addons" / "repair.py"),
                ("passthrough", ADDON),
            ):
                p, port = start_proxy(upstream, addon, tmpd, label, procs)
                proxies[label] = (p, f"http://127.0.0.1:{port}")
            with httpx.Client(timeout=120) as client:
                for name, (api, path, request, _build) in () if memory_only else STREAMS.items():
                    reqbody = json.dumps(request).encode()
                    expect = masked(repair_in_process(api, request, events_of(recs[f"bench-{name}-event"][1]))[0])
                    for mode, suffix, pause_ms in MODES:
                        if pause_ms and not paced:
                            continue
                        rec = f"bench-{name}-{suffix}"
                        _, original, n_events = recs[rec]
                        headers = {
                            "content-type": "application/json",
                            "accept-encoding": "identity",
                            "x-streamfix-recording": rec,
                            "x-streamfix-delay-ms": str(pause_ms),
                        }
                        cpu: dict[str, list[float]] = {"repair": [], "passthrough": []}
                        reads: list[int] = []
                        ok = True
                        per_sample = {"repair": 1, "passthrough": 1}
                        for i in range(repeats + 1):  # round 0 warms both up and is not counted
                            order = ("repair", "passthrough") if i % 2 else ("passthrough", "repair")
                            for label in order:
                                proc, base = proxies[label]
                                c0, n0 = cpu_seconds(proc.p.pid), cpu_ns(proc.p.pid)
                                for _ in range(per_sample[label]):
                                    got, n_reads = fetch(client, base + path, reqbody, headers)
                                    ok &= (masked(got) == expect) if label == "repair" else (got == original)
                                    if label == "passthrough":
                                        reads.append(n_reads)
                                if i:
                                    cpu[label].append((cpu_seconds(proc.p.pid) - c0) / per_sample[label])
                                else:  # enough requests per sample for >= MIN_SAMPLE_CPU of 10 ms ticks
                                    one = max(cpu_ns(proc.p.pid) - n0, 1) / 1e9
                                    per_sample[label] = max(1, min(MAX_PER_SAMPLE, math.ceil(MIN_SAMPLE_CPU / one)))
                        rep, base_cpu = statistics.median(cpu["repair"]), statistics.median(cpu["passthrough"])
                        rows.append(
                            {
                                "stream": name,
                                "mode": mode,
                                "events": n_events,
                                "events_per_read": n_events / statistics.median(reads),
                                "repair_ms": rep * 1e3,
                                "passthrough_ms": base_cpu * 1e3,
                                "repair_us": rep / n_events * 1e6,
                                "passthrough_us": base_cpu / n_events * 1e6,
                                "ratio": rep / base_cpu if base_cpu else float("nan"),
                                "extra_us": (rep - base_cpu) / n_events * 1e6,
                                "bodies_ok": ok,
                            }
                        )
            res.memory = _memory(proxies, recs)
            if paced and not memory_only:
                res.slow = _slow_paced(proxies, recs)
        finally:
            for p in reversed(procs):
                p.stop()
    return res


def bench_floors(repeats: int) -> list[dict[str, Any]]:
    """mitmdump CPU per event, one event per write back to back, for each floor of
    ``addon.py`` and for the repair addon, one mitmdump each, in rotating order:
    where between ``stream = True`` and the repair the cost arises."""
    import httpx

    from .addon import FLOORS  # each one step more than the last (its docstring)

    rows = []
    with tempfile.TemporaryDirectory(prefix="streamfix-floors-") as tmp:
        tmpd = Path(tmp)
        recs = write_recordings(tmpd / "recordings")
        procs: list[Proc] = []
        try:
            upstream = start_replay(tmpd, procs)
            proxies: dict[str, tuple[Proc, str]] = {}
            for floor in FLOORS:
                addon = ADDON
                p, port = start_proxy(upstream, addon, tmpd, floor, procs, "--set", f"streamfix_bench_floor={floor}")
                proxies[floor] = (p, f"http://127.0.0.1:{port}")
            p, port = start_proxy(upstream, ROOT / "addons" / "repair.py", tmpd, "repair", procs)
            proxies["repair"] = (p, f"http://127.0.0.1:{port}")
            labels = list(proxies)
            with httpx.Client(timeout=120) as client:
                for name, (_api, path, request, _build) in STREAMS.items():
                    rec = f"bench-{name}-event"
                    _, original, n_events = recs[rec]
                    reqbody = json.dumps(request).encode()
                    headers = {
                        "content-type": "application/json",
                        "accept-encoding": "identity",
                        "x-streamfix-recording": rec,
                        "x-streamfix-delay-ms": "0",
                    }
                    cpu: dict[str, list[float]] = {label: [] for label in labels}
                    per_sample = dict.fromkeys(labels, 1)
                    ok = True
                    for i in range(repeats + 1):  # round 0 warms up and calibrates
                        k = i % len(labels)
                        for label in labels[k:] + labels[:k]:  # each proxy first in turn
                            proc, base = proxies[label]
                            c0, n0 = cpu_seconds(proc.p.pid), cpu_ns(proc.p.pid)
                            for _ in range(per_sample[label]):
                                got, _reads = fetch(client, base + path, reqbody, headers)
                                if label != "repair":
                                    ok &= got == original
                            if i:
                                cpu[label].append((cpu_seconds(proc.p.pid) - c0) / per_sample[label])
                            else:
                                one = max(cpu_ns(proc.p.pid) - n0, 1) / 1e9
                                per_sample[label] = max(1, min(MAX_PER_SAMPLE, math.ceil(MIN_SAMPLE_CPU / one)))
                    us = {label: statistics.median(v) / n_events * 1e6 for label, v in cpu.items()}
                    rows.append({"stream": name, "events": n_events, "us": us, "bodies_ok": ok})
        finally:
            for p in reversed(procs):
                p.stop()
    return rows
