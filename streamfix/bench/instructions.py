"""Instructions per upstream event inside mitmdump, counted by valgrind's callgrind.

    python -m streamfix.bench --instructions      # `just bench --instructions`, ~10 min on 2 cores
    python -m streamfix.bench.instructions --quick      # two streams, one event per write
    python -m streamfix.bench.instructions --against ../other-checkout   # A/B of two checkouts, same run

CPU time on a shared 2-core machine moves by 10-30 % between runs of the same code;
instruction counts move far less (within about 1 % on an idle machine; run it on one: with
the cores busy the proxies run slower, asyncio suspends and resumes more per read, and the
upstream leg read 1.047x where it reads 1.035x idle, docs/benchmarks.md). Each proxy
is a mitmdump in reverse mode in front of the replay upstream, run under
``valgrind --tool=callgrind --instr-atstart=no``: nothing is counted until
``callgrind_control -i on PID``, which is sent after one warm-up request of the same
stream, and ``-i off`` right after exactly one measured request; the dump's total,
divided by the stream's upstream events, is the figure. Every body is checked (the
repaired one against the in-process repair, the passthrough one against the original).

The proxies, all in the same run: ``passthrough`` (``flow.response.stream = True``,
``streamfix/bench/addon.py``: the floor), ``repair`` (``addons/repair.py`` on the
compiled core when one is built for these sources, wire/_core.py) and ``repair-pure``
(the same with ``STREAMFIX_PURE=1``); ``--floors`` adds the bench addon's floors
(identity callable, + SSE parse, + one JSON parse per event), ``--against DIR`` the
repair addon of another checkout (its own core: pure unless built there).

The upstream writes back to back, one event per write or 16 KiB per write, as in
``streamfix.bench`` (b); events/read is counted on the client side (mitmdump forwards
each read as one chunk).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..procs import ROOT, Proc
from . import mitm
from . import streams as synthetic
from .inprocess import repair_in_process
from .report import machine

MODES = (("1 event/write", "event"), ("16 KiB writes", "batched"))
ALL_STREAMS = {**synthetic.STREAMS, **synthetic.SHORT_STREAMS}


def valgrind() -> tuple[str, str]:
    """(valgrind, callgrind_control): found, or installed with apt-get when root; else exit
    with what to install."""
    vg, ctl = shutil.which("valgrind"), shutil.which("callgrind_control")
    if vg and ctl:
        return vg, ctl
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("streamfix.bench: valgrind is missing: apt-get install valgrind", file=sys.stderr, flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "valgrind"]
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
            subprocess.run(cmd, env=env, check=False)
        vg, ctl = shutil.which("valgrind"), shutil.which("callgrind_control")
        if vg and ctl:
            return vg, ctl
    raise SystemExit(
        "streamfix.bench --instructions needs valgrind (callgrind and callgrind_control): "
        "install it (Debian/Ubuntu: apt-get install valgrind; as root the bench installs it itself)"
    )


def counted_run(module: str, args: list[str], out: Path) -> int:
    """Instructions of one whole ``python -m module args`` under callgrind (its profile
    written to ``out``): what the in-process benches (metrics, told) compare, N and 6N
    times against a baseline in the same run."""
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", module, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if m is None:
        raise RuntimeError(f"callgrind gave no count:\n{r.stderr[-2000:]}")
    return int(m.group(1))


class Counted:
    """One mitmdump under callgrind: instrumentation off until :meth:`measure`."""

    def __init__(self, label: str, proc: Proc, port: int, ctl: str, dumps: Path) -> None:
        self.label = label
        self.proc = proc
        self.base = f"http://127.0.0.1:{port}"
        self.ctl = ctl
        self.dumps = dumps

    def _ctl(self, *args: str) -> None:
        r = subprocess.run(
            [self.ctl, *args, str(self.proc.p.pid)], capture_output=True, text=True, timeout=300, check=False
        )
        if r.returncode != 0 or "OK" not in r.stdout:
            raise RuntimeError(f"callgrind_control {' '.join(args)} failed for {self.label}: {r.stdout}{r.stderr}")

    def measure(self, fetch: Any) -> tuple[int, Any]:
        """Instructions of exactly one call of ``fetch`` (one request), and its result."""
        self._ctl("-z")
        self._ctl("-i", "on")
        try:
            got = fetch()
        finally:
            self._ctl("-i", "off")
        before = set(self.dumps.glob(f"cg-{self.label}.*"))
        self._ctl("-d")
        new = sorted(set(self.dumps.glob(f"cg-{self.label}.*")) - before, key=lambda p: p.stat().st_mtime)
        if not new:
            raise RuntimeError(f"no callgrind dump for {self.label}")
        m = re.search(r"^totals: (\d+)", new[-1].read_text("utf-8", "replace"), re.MULTILINE)
        if not m:
            raise RuntimeError(f"no totals in {new[-1]}")
        return int(m.group(1)), got


def _start(label: str, upstream: str, tmpd: Path, procs: list[Proc], vg: str, ctl: str, **kw: Any) -> Counted:
    addon = kw.pop("addon")
    args = kw.pop("args", ())
    dumps = tmpd / "dumps"
    dumps.mkdir(exist_ok=True)
    prefix = [vg, "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={dumps}/cg-{label}.%p"]
    # one hash seed for every proxy: str hashes decide dict and set layouts, which moved the
    # counts by up to 1.6 % between processes of the same code
    kw["env"] = {"PYTHONHASHSEED": "0", **kw.get("env", {})}
    p, port = mitm.start_proxy(upstream, addon, tmpd, label, procs, *args, prefix=prefix, timeout=600, **kw)
    return Counted(label, p, port, ctl, dumps)


def run(
    streams: list[str],
    modes: list[str],
    floors: bool,
    against: list[Path],
    repeats: int,
    only: list[str] | None = None,
    keep: Path | None = None,
    delay_ms: float = 0.0,
) -> dict[str, Any]:
    import httpx

    from streamfix.wire import _core

    vg, ctl = valgrind()
    compiled = (_core.BUILDS / _core.key() / "wire").is_dir() and _core.wanted()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="streamfix-instr-") as tmp:
        tmpd = Path(tmp)
        if keep is not None:  # the callgrind dumps stay there (callgrind_annotate reads them)
            keep.mkdir(parents=True, exist_ok=True)
            (tmpd / "dumps").symlink_to(keep.resolve())
        recs = mitm.write_recordings(tmpd / "recordings")
        procs: list[Proc] = []
        try:
            upstream = mitm.start_replay(tmpd, procs)
            specs: list[tuple[str, dict[str, Any]]] = [("passthrough", {"addon": mitm.ADDON})]
            if floors:
                for f in ("identity", "parse", "json"):
                    specs.append(
                        (
                            f,
                            {
                                "addon": mitm.ADDON,
                                "args": ("--set", f"streamfix_bench_floor={f}"),
                            },
                        )
                    )
            specs.append(("repair", {"addon": ROOT / "addons" / "repair.py"}))
            if compiled:
                specs.append(("repair-pure", {"addon": ROOT / "addons" / "repair.py", "env": {_core.PURE_ENV: "1"}}))
            for i, other in enumerate(against):
                specs.append((f"against{i + 1}", {"addon": other / "addons" / "repair.py", "root": other}))
            if only:
                specs = [s for s in specs if s[0] in only or s[0] == "passthrough"]
            with concurrent.futures.ThreadPoolExecutor(2) as pool:  # valgrind starts slowly
                proxies = list(pool.map(lambda s: _start(s[0], upstream, tmpd, procs, vg, ctl, **s[1]), specs))
            cores = {}
            for c in proxies:
                m = re.search(r"streamfix: protocol core: (.*)", c.proc.output)
                cores[c.label] = m.group(1) if m else ""

            def one(c: Counted, name: str, suffix: str) -> dict[str, Any]:
                _api, path, request, _build = ALL_STREAMS[name]
                rec = f"bench-{name}-{suffix}"
                _, original, n_events = recs[rec]
                body = json.dumps(request).encode()
                headers = {
                    "content-type": "application/json",
                    "accept-encoding": "identity",
                    "x-streamfix-recording": rec,
                    "x-streamfix-delay-ms": f"{delay_ms:g}",
                }
                with httpx.Client(timeout=1200) as client:

                    def fetch() -> tuple[bytes, int]:
                        return mitm.fetch(client, c.base + path, body, headers)

                    fetch()  # warm-up, not counted
                    counts, reads, ok = [], [], True
                    for _ in range(repeats):
                        n, (got, n_reads) = c.measure(fetch)
                        counts.append(n)
                        reads.append(n_reads)
                        if c.label.startswith(("repair", "against")):
                            ok &= mitm.masked(got) == expect[name]
                        else:
                            ok &= got == original
                return {
                    "proxy": c.label,
                    "stream": name,
                    "mode": suffix,
                    "events": n_events,
                    "ir": statistics.median(counts),
                    "ir_all": counts,
                    "reads": statistics.median(reads),
                    "ok": ok,
                }

            expect = {
                name: mitm.masked(
                    repair_in_process(
                        ALL_STREAMS[name][0], ALL_STREAMS[name][2], synthetic.events_of(recs[f"bench-{name}-event"][1])
                    )[0]
                )
                for name in streams
            }
            jobs = [(c, name, suffix) for name in streams for suffix in modes for c in proxies]
            # two at a time: each proxy is one process; the counts do not depend on the load
            by_proxy: dict[str, list[tuple[Counted, str, str]]] = {}
            for j in jobs:
                by_proxy.setdefault(j[0].label, []).append(j)
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                futs = [pool.submit(lambda js: [one(*j) for j in js], js) for js in by_proxy.values()]
                for fut in futs:
                    rows += fut.result()
        finally:
            for p in reversed(procs):
                p.stop()
    return {"rows": rows, "cores": cores, "labels": [s[0] for s in specs], "against": against, "delay_ms": delay_ms}


# --- the upstream leg: a provider's stream through the regular listener ----------

UPSTREAM_STREAMS: dict[str, tuple[str, str]] = {
    # name -> (the bench stream whose body the provider sends, the provider path CPA calls)
    "gemini": ("gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
    "anthropic": ("anthropic", "/v1/messages?beta=true"),
    "openai-chat": ("chat", "/v1/chat/completions"),
    "responses": ("responses-claude", "/v1/responses"),
}
"""The upstream leg's row: each provider wire the decoders read, as CPA calls it. OpenAI
chat and Responses bodies are the bench's own streams of those wires; Gemini's is
:func:`gemini_stream`, Anthropic's :func:`anthropic_stream`."""


def gemini_stream(text: int = 2400, thoughts: int = 200, seed: int = 3) -> bytes:
    """A long Gemini ``streamGenerateContent?alt=sse`` answer: thought parts, text parts (one
    token-sized delta per chunk, CRLF framing as Google sends it), a functionCall, the
    finishing chunk with ``usageMetadata``."""
    import random

    import orjson

    rng = random.Random(seed)

    def chunk(parts: list[dict[str, Any]], **extra: Any) -> bytes:
        obj = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, **extra.pop("cand", {})}],
               "modelVersion": "gemini-2.5-flash", "responseId": "bench", **extra}  # fmt: skip
        return b"data: " + orjson.dumps(obj) + b"\r\n\r\n"

    out = [chunk([{"text": d, "thought": True}]) for d in synthetic.deltas(rng, thoughts)]
    out += [chunk([{"text": d}]) for d in synthetic.deltas(rng, text)]
    out.append(chunk([{"functionCall": {"name": "write_file", "args": {"path": "a.txt", "content": "x" * 200}}}]))
    usage = {"promptTokenCount": 1200, "candidatesTokenCount": 2600, "thoughtsTokenCount": 200, "totalTokenCount": 4000}
    out.append(chunk([{"text": ""}], cand={"finishReason": "STOP"}, usageMetadata=usage))
    return b"".join(out)


def anthropic_stream(text: int = 2400, thinking: int = 200, seed: int = 4) -> bytes:
    """A long Anthropic Messages stream as the API sends it (``event: TYPE`` + ``data:``,
    LF framing): message_start, a thinking block, a text block, a tool_use block whose
    input streams in fragments, message_delta with the stop reason and usage, message_stop."""
    import random

    import orjson

    rng = random.Random(seed)
    out: list[bytes] = []

    def ev(obj: dict[str, Any]) -> None:
        out.append(b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n")

    ev({"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 800, "output_tokens": 1}}})  # fmt: skip
    blocks = [("thinking", "thinking_delta", "thinking", synthetic.deltas(rng, thinking)),
              ("text", "text_delta", "text", synthetic.deltas(rng, text)),
              ("tool_use", "input_json_delta", "partial_json", ['{"path": "a.txt", "content": "', *("x" * 8 for _ in range(100)), '"}'])]  # fmt: skip
    for i, (btype, dtype, key, pieces) in enumerate(blocks):
        start: dict[str, Any] = (
            {"type": btype, btype: ""}
            if btype != "tool_use"
            else {"type": "tool_use", "id": "toolu_b", "name": "write_file", "input": {}}
        )
        ev({"type": "content_block_start", "index": i, "content_block": start})
        for piece in pieces:
            ev({"type": "content_block_delta", "index": i, "delta": {"type": dtype, key: piece}})
        ev({"type": "content_block_stop", "index": i})
    ev(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 2900},
        }
    )
    ev({"type": "message_stop"})
    return b"".join(out)


def _upstream_recordings(root: Path, recs: dict[str, tuple[str, bytes, int]]) -> dict[str, tuple[str, bytes, int]]:
    """The Gemini and Anthropic provider streams as bench recordings (event and 16 KiB
    writes) beside the others."""
    out = dict(recs)
    for name, body in (("gemini", gemini_stream()), ("anthropic", anthropic_stream())):
        _recording(root, name, body, out)
    return out


def _recording(root: Path, name: str, body: bytes, out: dict[str, tuple[str, bytes, int]]) -> None:
    for mode, chunk in (("event", "event"), ("batched", "bytes:16384")):
        rec = root / f"bench-{name}-{mode}"
        rec.mkdir(parents=True, exist_ok=True)
        (rec / "response.body").write_bytes(body)
        (rec / "recording.json").write_text(json.dumps({
            "description": f"streamfix.bench.instructions: a {name} provider stream, {mode} writes", "api": name,
            "kind": "clean", "source": "streamfix.bench.instructions (synthetic)",
            "request": {"method": "POST", "path": UPSTREAM_STREAMS[name][1],
                        "headers": {"content-type": "application/json"}, "body": {}},
            "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
            "pacing": {"delay_ms": 0, "chunk": chunk}}, indent=1))  # fmt: skip
        out[rec.name] = (UPSTREAM_STREAMS[name][1], body, len(synthetic.events_of(body)))


def run_upstream(streams: list[str], modes: list[str], repeats: int, keep: Path | None = None) -> dict[str, Any]:
    """The upstream leg against plain forwarding, both mitmdump in regular mode (CPA's
    ``proxy-url``), a client sending each provider request through it to the replay
    upstream: ``passthrough`` (``stream = True``) and ``upstream-leg`` (``addons/
    upstream.py``, ``streamfix_upstream_hosts=127.0.0.1``: every stream decoded)."""
    import httpx

    vg, ctl = valgrind()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="streamfix-instr-up-") as tmp:
        tmpd = Path(tmp)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (tmpd / "dumps").symlink_to(keep.resolve())
        recs = _upstream_recordings(tmpd / "recordings", mitm.write_recordings(tmpd / "recordings"))
        procs: list[Proc] = []
        try:
            upstream = mitm.start_replay(tmpd, procs)
            specs: list[tuple[str, dict[str, Any]]] = [
                ("passthrough", {"addon": mitm.ADDON, "regular": True}),
                ("upstream-leg", {"addon": ROOT / "addons" / "upstream.py", "regular": True,
                                  "args": ("--set", "streamfix_upstream_hosts=127.0.0.1")}),
            ]  # fmt: skip
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                proxies = list(pool.map(lambda s: _start(s[0], upstream, tmpd, procs, vg, ctl, **s[1]), specs))

            def one(c: Counted, name: str, suffix: str) -> dict[str, Any]:
                source, path = UPSTREAM_STREAMS[name]
                rec = f"bench-{source}-{suffix}"
                _, original, n_events = recs[rec]
                headers = {"content-type": "application/json", "accept-encoding": "identity",
                           "x-streamfix-recording": rec, "x-streamfix-delay-ms": "0"}  # fmt: skip
                with httpx.Client(timeout=1200, proxy=c.base, trust_env=False) as client:

                    def fetch() -> tuple[bytes, int]:
                        return mitm.fetch(client, upstream + path, b'{"contents":[]}', headers)

                    fetch()
                    counts, reads, ok = [], [], True
                    for _ in range(repeats):
                        n, (got, n_reads) = c.measure(fetch)
                        counts.append(n)
                        reads.append(n_reads)
                        ok &= got == original  # the upstream body is never changed
                log = c.proc.output
                decoded = c.label == "passthrough" or "streamfix: upstream " in log
                return {"proxy": c.label, "stream": name, "mode": suffix, "events": n_events,
                        "ir": statistics.median(counts), "ir_all": counts, "reads": statistics.median(reads),
                        "ok": ok and decoded}  # fmt: skip

            by_proxy: dict[str, list[tuple[Counted, str, str]]] = {}
            for c in proxies:
                by_proxy[c.label] = [(c, name, suffix) for name in streams for suffix in modes]
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                for f in [pool.submit(lambda js: [one(*j) for j in js], js) for js in by_proxy.values()]:
                    rows += f.result()
        finally:
            for p in reversed(procs):
                p.stop()
    return {"rows": rows, "cores": {}, "labels": [s[0] for s in specs], "against": [], "delay_ms": 0.0}


def report(res: dict[str, Any], repeats: int) -> str:
    m = machine()
    labels = res["labels"]
    out = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        (
            f"valgrind callgrind, instructions counted for {'exactly one' if repeats == 1 else f'{repeats} (median)'} "
            "measured request per figure, after one warm-up request; upstream writes "
            + (f"{res['delay_ms']:g} ms apart" if res.get("delay_ms") else "back to back")
        ),
    ]
    for label in labels:
        if res["cores"].get(label):
            out.append(f"  {label}: protocol core {res['cores'][label]}")
    for i, other in enumerate(res["against"]):
        out.append(f"  against{i + 1}: {other}")
    out += [
        "",
        "instructions per upstream event (and as a ratio to passthrough, stream = True)",
        "| stream | upstream writes | events | events/read | " + " | ".join(labels) + " | bodies |",
        "|---|---|---:|---:|" + "---:|" * len(labels) + "---|",
    ]
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in res["rows"]:
        cells.setdefault((r["stream"], r["mode"]), {})[r["proxy"]] = r
    mode_name = {s: n for n, s in MODES}
    for (stream, mode), by in cells.items():
        base = by["passthrough"]
        per = {label: by[label]["ir"] / by[label]["events"] for label in labels if label in by}
        row = [
            stream,
            mode_name[mode],
            str(base["events"]),
            f"{base['events'] / max(base['reads'], 1):.1f}",
        ]
        for label in labels:
            if label not in per:
                row.append("")
            elif label == "passthrough":
                row.append(f"{per[label]:,.0f}")
            else:
                row.append(f"{per[label]:,.0f} ({per[label] / per['passthrough']:.3f}x)")
        row.append("ok" if all(r["ok"] for r in by.values()) else "MISMATCH")
        out.append("| " + " | ".join(row) + " |")
    if "repair" in labels and "repair-pure" in labels:
        out += ["", "compiled core against pure, the addon's own instructions (repair - passthrough) per event:"]
        for (stream, mode), by in cells.items():
            pt = by["passthrough"]["ir"]
            c, p = by["repair"]["ir"] - pt, by["repair-pure"]["ir"] - pt
            n = by["passthrough"]["events"]
            out.append(
                f"  {stream}, {mode_name[mode]}: compiled +{c / n:,.0f}, pure +{p / n:,.0f} per event ({c / p:.2f}x)"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.instructions", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two streams (responses-claude, chat), one event per write")
    ap.add_argument(
        "--streams",
        nargs="*",
        default=None,
        help=f"bench streams (default all: {', '.join(synthetic.STREAMS)}; also {', '.join(synthetic.SHORT_STREAMS)}, "
        "a short turn: what a flow costs beyond its events)",
    )
    ap.add_argument("--floors", action="store_true", help="also the bench addon's floors (identity, parse, json)")
    ap.add_argument(
        "--upstream-leg",
        action="store_true",
        help=f"the upstream leg's row instead: provider streams ({', '.join(UPSTREAM_STREAMS)}) through mitmdump "
        "in regular mode, addons/upstream.py against plain stream=True forwarding",
    )
    ap.add_argument(
        "--against", action="append", type=Path, default=[], help="also the repair addon of this checkout (A/B)"
    )
    ap.add_argument("--repeats", type=int, default=1, help="measured requests per figure (median; default 1)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    ap.add_argument("--proxies", default=None, help="only these proxies (comma-separated labels; passthrough always)")
    ap.add_argument("--keep-dumps", type=Path, default=None, help="keep the callgrind dumps in this directory")
    ap.add_argument(
        "--delay-ms",
        type=float,
        default=0.0,
        help="the upstream pauses this long between writes (paced like a model; default 0: back to back)",
    )
    a = ap.parse_args(argv)
    streams = a.streams or (["responses-claude", "chat"] if a.quick else list(synthetic.STREAMS))
    modes = ["event"] if a.quick else [s for _, s in MODES]
    t0 = time.monotonic()
    if a.upstream_leg:
        names = [n for n in (a.streams or UPSTREAM_STREAMS) if n in UPSTREAM_STREAMS]
        res = run_upstream(names, ["event"] if a.quick else [s for _, s in MODES], max(1, a.repeats), a.keep_dumps)
        print(report(res, a.repeats))
        if a.json:
            a.json.write_text(json.dumps({k: v for k, v in res.items() if k != "against"}, indent=1, default=str))
        print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
        return 0
    only = a.proxies.split(",") if a.proxies else None
    res = run(
        streams, modes, a.floors, [p.resolve() for p in a.against], max(1, a.repeats), only, a.keep_dumps, a.delay_ms
    )
    print(report(res, a.repeats))
    if a.json:
        a.json.write_text(json.dumps({k: v for k, v in res.items() if k != "against"}, indent=1, default=str))
    print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
