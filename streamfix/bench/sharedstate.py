"""What the Redis round trips of the shared correlation cost per turn (``--workers N``).

    python -m streamfix.bench.sharedstate                  # latency, about a minute
    python -m streamfix.bench.sharedstate --instructions   # + instructions (valgrind's callgrind), a few minutes

One turn's correlation, as the two legs make it (addons/repair.py, addons/upstream.py):
the client leg notes its request; the upstream leg matches CPA's Devin request to it,
records the call's start, then its result at the end-of-stream envelope; the client leg's
verdict resolves it at the terminal event (looks for a linked call still open, claims the
record, drops the pending request). Measured on the same inputs for the in-memory
:class:`wire.correlate.Correlator` (one sidecar) and for two
:class:`addons.sharedstate.SharedCorrelator` over one real redis-server (started here on
127.0.0.1, no persistence), the client leg's and the upstream leg's, each its own
connection, as two workers have them.

* **latency**: per turn, the time each step holds its event loop (the calls are
  synchronous and each holds the step's flow: the note and the match before the request
  goes on, the result before the envelope goes on, the resolve before the terminal
  event), median and p99 over ``--turns`` turns, and the Redis server's own CPU per turn;
* **instructions** (``--instructions``): the Python process's instructions per turn
  (callgrind, the whole process run with N turns minus the same run with none, divided
  by N), in memory and with Redis: what the Redis client's work adds to a worker.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("note", "match+started", "finished", "resolve")


def _frames(i: int) -> bytes:
    from streamfix.wire import devin_pb2 as pb
    from streamfix.wire.connect import encode_end_stream, encode_frame

    def f(**kw) -> bytes:
        return encode_frame(pb.GetChatMessageResponse(**kw).SerializeToString())

    out = [f(text=f"Turn {i}: writing the page now.".encode()), f(stop_reason=3, delta_tokens=7)]
    out.append(f(usage=pb.ModelUsage(prompt_tokens=100 + i, output_tokens=40, cache_read_tokens=5, model=b"m")))
    return b"".join(out) + encode_end_stream()


def _request(prompt: str) -> bytes:
    from streamfix.wire import devin_pb2 as pb
    from streamfix.wire.connect import encode_frame

    req = pb.GetChatMessageRequest(
        system_prompt="sys",
        prompts=[pb.ChatMessagePrompt(source=pb.CHAT_MESSAGE_SOURCE_USER, prompt=prompt)],
        configuration=pb.CompletionConfiguration(max_tokens=128000),
    )
    return encode_frame(req.SerializeToString())


def turns(client, upstream, n: int, offset: int = 0) -> dict[str, list[float]]:
    """``n`` turns through the two correlators; each step's duration (ms) per turn."""
    from streamfix.wire.devin import DevinTap, read_request
    from streamfix.wire.verdict import Verdict

    times: dict[str, list[float]] = {s: [] for s in STEPS}
    clock = time.perf_counter
    for k in range(offset, offset + n):
        cid, uid = f"client-{os.getpid()}-{k}", f"upstream-{os.getpid()}-{k}"
        prompt = f"Build the page for turn {k}, with a header. [conv:{k}]"
        info = read_request(_request(prompt))
        tap = DevinTap()
        tap.feed(_frames(k))
        result = tap.result()
        v = Verdict()
        v.request({"max_tokens": 400})
        v.observe_text(f"Turn {k}: writing the page now.")
        t0 = clock()
        client.note_client_request(cid, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}],
                                                                  "max_tokens": 400})  # fmt: skip
        t1 = clock()
        p = upstream.match_request(uid, info)
        upstream.upstream_started(uid, p.flow_id if p else None, 400, 128000, p.last_match_ambiguous if p else False)
        t2 = clock()
        upstream.upstream_finished(uid, result)
        t3 = clock()
        v.resolver = r = client.resolver(cid)
        d = v.decide()
        t4 = clock()
        if d.outcome != "max_tokens" or r.record is None or p is None:
            raise RuntimeError(f"turn {k}: not matched ({d.outcome}, {r.record}, {p})")
        for s, a, b in zip(STEPS, (t0, t1, t2, t3), (t1, t2, t3, t4)):
            times[s].append((b - a) * 1000)
    return times


def _redis(tmpd: Path) -> tuple[subprocess.Popen, str]:
    from ..procs import free_port, wait_port

    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("streamfix.bench.sharedstate needs redis-server (scripts/install-balancer)")
    port = free_port()
    p = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", str(tmpd), "--loglevel", "warning"], stdin=subprocess.DEVNULL)  # fmt: skip
    wait_port(port, proc=p)
    return p, f"redis://127.0.0.1:{port}/0"


def _pair(kind: str, url: str | None):
    from streamfix.wire.correlate import Correlator

    if kind == "memory":
        c = Correlator()
        return c, c
    from streamfix.addons.sharedstate import RedisStore, SharedCorrelator

    assert url is not None
    return (SharedCorrelator(RedisStore(url, 1.0), "1"), SharedCorrelator(RedisStore(url, 1.0), "2"))


def _server_cpu(url: str) -> float:
    import redis

    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def latency(n: int, url: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind in ("memory", "redis"):
        client, upstream = _pair(kind, url)
        turns(client, upstream, 200, offset=10_000_000)  # warm-up
        cpu0 = _server_cpu(url)
        t = turns(client, upstream, n)
        cpu = _server_cpu(url) - cpu0
        row = {}
        for s in STEPS:
            row[f"{s} p50"] = statistics.median(t[s])
            row[f"{s} p99"] = sorted(t[s])[int(0.99 * len(t[s]))]
        total = [sum(x) for x in zip(*(t[s] for s in STEPS))]
        row["turn p50"], row["turn p99"] = statistics.median(total), sorted(total)[int(0.99 * len(total))]
        row["server cpu us"] = cpu / n * 1e6 if kind == "redis" else 0.0
        out[kind] = row
    return out


def _child(kind: str, n: int, url: str) -> None:
    """Under callgrind: set up, then ``n`` turns (the count is the whole process's)."""
    client, upstream = _pair(kind, url)
    if n:
        turns(client, upstream, n)


def instructions(n: int, url: str) -> dict[str, float]:
    vg = shutil.which("valgrind")
    if vg is None:
        raise SystemExit("streamfix.bench.sharedstate --instructions needs valgrind (apt-get install valgrind)")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="streamfix-bench-redis-") as d:
        for kind in ("memory", "redis"):
            counts = []
            for k in (0, n):
                f = Path(d) / f"cg-{kind}-{k}.out"
                env = {**os.environ, "PYTHONHASHSEED": "0",
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}  # fmt: skip
                subprocess.run([vg, "--tool=callgrind", f"--callgrind-out-file={f}", sys.executable, "-m",
                                "streamfix.bench.sharedstate", "--child", kind, str(k), url],
                               check=True, env=env, capture_output=True, cwd=ROOT)  # fmt: skip
                m = re.search(r"^(?:summary|totals):\s*(\d+)", f.read_text(errors="replace"), re.MULTILINE)
                if m is None:
                    raise RuntimeError(f"no totals in {f}")
                counts.append(int(m.group(1)))
            out[kind] = (counts[1] - counts[0]) / n
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        _child(argv[1], int(argv[2]), argv[3])
        return 0
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.sharedstate", description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--instructions", action="store_true", help="also count instructions per turn (callgrind)")
    ap.add_argument("--instruction-turns", type=int, default=300)
    a = ap.parse_args(argv)
    from .report import machine

    with tempfile.TemporaryDirectory(prefix="streamfix-bench-redis-") as d:
        proc, url = _redis(Path(d))
        try:
            m = machine()
            print(f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; load average "
                  f"{Path('/proc/loadavg').read_text().split()[0]}")  # fmt: skip
            lat = latency(a.turns, url)
            print(f"\nper turn, ms (median / p99 of {a.turns} turns): the time each step holds its event loop")
            print("| step | in memory | Redis | added |")
            print("|---|---:|---:|---:|")
            for s in (*STEPS, "turn"):
                mem, red = lat["memory"], lat["redis"]
                print(f"| {s} | {mem[s + ' p50']:.3f} / {mem[s + ' p99']:.3f} | {red[s + ' p50']:.3f} / "
                      f"{red[s + ' p99']:.3f} | {red[s + ' p50'] - mem[s + ' p50']:+.3f} / "
                      f"{red[s + ' p99'] - mem[s + ' p99']:+.3f} |")  # fmt: skip
            print(f"\nredis-server CPU per turn: {lat['redis']['server cpu us']:.0f} µs")
            if a.instructions:
                ins = instructions(a.instruction_turns, url)
                print(f"\ninstructions per turn (callgrind, the worker side; {a.instruction_turns} turns): in memory "
                      f"{ins['memory']:,.0f}, Redis {ins['redis']:,.0f} ({ins['redis'] - ins['memory']:+,.0f}, "
                      f"{ins['redis'] / ins['memory']:.1f}x)")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
