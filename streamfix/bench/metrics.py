"""What ``streamfix_metrics`` costs, in instructions (valgrind callgrind), per turn and per flow.

    python -m streamfix.bench.metrics            # needs valgrind on the PATH

Off, the metrics addon has no hooks (tests/addons/test_metrics.py), so it costs nothing per event
or per flow. On, it costs nothing per event either (no hook runs per SSE read or
WebSocket message): per turn one ``Registry.observe`` of the turn record, per client flow
three hooks (requestheaders, responseheaders, response). Each is run N and 6N times under
callgrind, with the same setup run 0 times as the baseline in the same run; the difference
divided by 5N is the cost of one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

TURN = {
    "time": "2026-11-30T20:35:45.922Z", "flow": "a09baffb", "key": "aebadfca59ab", "api": "responses",
    "transport": "sse", "path": "/v1/responses", "model": "devin/swe-2", "upstream_model": "swe-fake", "status": 200,
    "ended": "truncated",
    "tokens": {"client": {"input_tokens": 36, "output_tokens": 25, "total_tokens": 61, "cached_tokens": 12},
               "upstream": {"input_tokens": 36, "output_tokens": 25, "cached_tokens": 12, "total_tokens": 61,
                            "source": "field7"}},
    "verdict": {"outcome": "max_tokens", "native": False,
                "evidence": [{"source": "upstream", "says": "max_tokens", "detail": "Devin StopReason 3 MAX_TOKENS"}]},
    "rules": {"schema_fill": 3, "status": 3, "truncation": 1}, "bytes": {"in": 4792, "out": 4970}, "events": 20,
    "ttfb_ms": 118, "duration_ms": 194,
}  # fmt: skip
"""The README's turn log example (a truncated Responses turn, three rules fired)."""


def _run(n: int, what: str) -> None:
    from mitmproxy.proxy import mode_specs
    from mitmproxy.test import tflow

    from streamfix.addons import metrics

    reg = metrics.Registry(metrics.Bounded("model", 20), metrics.Bounded("key", 20), lambda: False)

    class Owner:
        reverse_only = True

        def gateway_answered(self) -> None:
            pass

    live = metrics.Live(Owner(), reg)  # type: ignore[arg-type]
    mode = mode_specs.ProxyMode.parse("reverse:http://127.0.0.1:8317")
    flows = []
    for _ in range(n):
        f = tflow.tflow(resp=True)
        f.client_conn.proxy_mode = mode
        assert f.response is not None  # (resp=True)
        f.response.stream = True
        flows.append(f)
    reg.observe(TURN)  # the first turn creates the series: not the steady state
    if what == "turn":
        for _ in range(n):
            reg.observe(TURN)
    elif what == "flow":
        for f in flows:
            live.requestheaders(f)
            live.responseheaders(f)
            live.response(f)


def _instructions(n: int, what: str, out: Path) -> int:
    from .instructions import counted_run

    return counted_run("streamfix.bench.metrics", ["--child", what, str(n)], out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.metrics", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _run(int(a.child[1]), a.child[0])
        return 0
    if shutil.which("valgrind") is None:
        print("needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        got = {}
        for what in ("none", "turn", "flow"):
            for n in (a.n, 6 * a.n):
                got[what, n] = _instructions(n, what, Path(d) / f"cg.{what}.{n}")
    base = got["none", 6 * a.n] - got["none", a.n]  # building 5N test flows
    for what, label in (("turn", "per turn (Registry.observe)"), ("flow", "per client flow (3 hooks)")):
        extra = (got[what, 6 * a.n] - got[what, a.n] - base) / (5 * a.n)
        print(f"{label}: {extra:,.0f} instructions")
    print(
        "per event: 0 of its own (no per-event hook); what any turn sink reads per event: python -m streamfix.bench.told"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
