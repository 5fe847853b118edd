"""The benchmarks' report: the machine, and the tables of :mod:`streamfix.bench` (a) to (d)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from .mitm import SLOW_PACE_MS, MitmResults


# --- report -------------------------------------------------------------------------
def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import mitmproxy.version

    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "mitmproxy": mitmproxy.version.VERSION,
        "platform": platform.platform(),
    }


def report(inproc: list[dict[str, Any]], res: MitmResults | None, r_in: int, r_mitm: int) -> str:
    m = machine()
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"medians of {r_in} runs in process, {r_mitm} runs per mitmdump figure",
        "",
        "(a) in process: repairer vs floor (SSE split + one orjson parse per event), one event per chunk",
        "| stream | events | floor ev/s | repairer ev/s | repairer/floor | floor µs/ev | repairer µs/ev | events changed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in inproc:
        err = f" (FAILED OPEN: {r['error']})" if r["error"] else ""
        lines.append(
            f"| {r['stream']} | {r['events']} | {r['floor_evs']:,.0f} | {r['repair_evs']:,.0f} | "
            f"{r['ratio']:.2f} | {r['floor_us']:.1f} | {r['repair_us']:.1f} | {r['changed']}{err} |"
        )
    mitm = res.rows if res is not None else []
    if mitm:
        lines += [
            "",
            "(b) mitmdump CPU (utime+stime) per event: repair addon vs stream=True passthrough, same upstream stream",
            "| stream | upstream writes | events | events/read | passthrough µs/ev | repair µs/ev | repair/passthrough | extra µs/ev | bodies |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in mitm:
            lines.append(
                f"| {r['stream']} | {r['mode']} | {r['events']} | {r['events_per_read']:.1f} | {r['passthrough_us']:.1f} | "
                f"{r['repair_us']:.1f} | {r['ratio']:.2f} | {r['extra_us']:+.1f} | {'ok' if r['bodies_ok'] else 'MISMATCH'} |"
            )
    slow = res.slow if res is not None else None
    if slow:
        lines += [
            "",
            f"(c) mitmdump CPU, model-paced {SLOW_PACE_MS:.0f} ms apart: all {slow['streams']} streams at once through each proxy",
            "| events | passthrough µs/ev (user + sys) | repair µs/ev (user + sys) | repair/passthrough |",
            "|---:|---:|---:|---:|",
            (
                f"| {slow['events']} | {slow['passthrough_us']:.1f} ({slow['passthrough_user_us']:.1f} + "
                f"{slow['passthrough_sys_us']:.1f}) | {slow['repair_us']:.1f} ({slow['repair_user_us']:.1f} + "
                f"{slow['repair_sys_us']:.1f}) | {slow['ratio']:.2f} |"
            ),
        ]
    mem = res.memory if res is not None else None
    if mem:
        lines += [
            "",
            f"(d) mitmdump RSS around one {mem[0]['events']:,}-event Responses stream ({mem[0]['mb']:.0f} MB, 4 KiB writes)",
            "| proxy | RSS before MB | after the deltas (75 % of the bytes) | peak MB | after MB | peak - before MB | bytes |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in mem:
            lines.append(
                f"| {r['proxy']} | {r['before_mb']:.1f} | {r['at90_mb'] - r['before_mb']:+.1f} | {r['peak_mb']:.1f} | {r['after_mb']:.1f} | "
                f"{r['peak_mb'] - r['before_mb']:+.1f} | {'ok' if r['bytes_ok'] else 'MISMATCH'} |"
            )
    return "\n".join(lines)


def report_floors(rows: list[dict[str, Any]], repeats: int) -> str:
    m = machine()
    out = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"medians of {repeats} runs; one event per upstream write, back to back",
        "",
        "mitmdump CPU per event (utime+stime), µs, and as a ratio to stream = True",
        "| stream | events | stream=True | identity callable | + SSE parse | + one JSON parse | repair addon | bodies |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        us = r["us"]
        base = us["stream"]
        cells = [f"{us[label]:.1f} ({us[label] / base:.2f})" for label in us]
        out.append(
            f"| {r['stream']} | {r['events']} | " + " | ".join(cells) + f" | {'ok' if r['bodies_ok'] else 'DIFF'} |"
        )
    return "\n".join(out)
