"""Prometheus metrics on a real Prometheus (Debian's ``prometheus``, installed by
``scripts/install-prometheus``, which ``scripts/test`` runs).

The full chain (client -> sidecar -> CPA stand-in -> sidecar -> fake Devin, see
tests/e2e/test_full_chain.py) with ``streamfix_metrics`` and a turn log; a real Prometheus
scrapes the sidecar every second with ``docs/prometheus-rules.yml`` loaded. After real
turns on chat, Responses (SSE and WebSocket) and messages, from three keys and three
models (bounded: one key id and one configured model get their own series):

* every count and sum Prometheus's query API returns equals the same sum computed here
  from the turn log (turns by API, transport, ending and model; tokens by leg, kind, key
  and model; events per rule; verdicts by outcome and evidence source; histogram counts
  and sums), with the bounds applied here by hand from the log's order;
* the streams-in-flight gauges are back to 0;
* every recording and alerting rule evaluated without error, and the recording rules
  produced series;
* every query of docs/grafana-dashboard.json runs on that Prometheus without error, and
  every metric it names is in the sidecar's exposition.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import orjson
import pytest
from chain import PATHS, TIMEOUT, Chain, request_body
from prom import DASHBOARD, KEYS, MODELS, PROMETHEUS, PROMTOOL, RULES, Prom, metrics_url, needs_prometheus
from streamfix.wire import redact
from support import show_logs_on_failure

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    d = tmp_path_factory.mktemp("prom")
    c = Chain(d)
    c.turns = d / "turns.jsonl"
    c.extra = ["--set", f"streamfix_log={c.turns}", "--set", "streamfix_metrics=127.0.0.1:0",
               "--set", f"streamfix_key_labels={redact.key_id(KEYS[2])}=team-three",
               "--set", "streamfix_metrics_max_keys=1", "--set", f"streamfix_metrics_models={MODELS[0]}"]  # fmt: skip
    prom = None
    try:
        c.up()
        c.metrics = metrics_url(c.mitm)
        if PROMETHEUS is not None:
            prom = Prom(d, c.metrics.removeprefix("http://"))
            c.procs["prometheus"] = prom.proc
        c.prom = prom
        yield c
    finally:
        c.down()


async def run_turns(chain: Chain) -> int:
    """Real turns through the chain: SSE on three APIs and a WebSocket with two turns."""
    import aiohttp

    scenarios = ["stop", "tool", "max_tokens", "max_tokens_text", "content_filter"]
    jobs = []
    combos = itertools.product(["chat", "responses", "messages"], scenarios)
    for i, (api, scenario) in enumerate(combos):
        body = request_body(api, f"Please do it. [scenario:{scenario}] [conv:pm{i:02d}-{api}] [delay:5]")
        body["model"] = MODELS[i % 3]
        jobs.append((api, body, KEYS[i % 3]))
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:

        async def one(api, body, key):
            r = await c.post(chain.base + PATHS[api], json=body, headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text

        await asyncio.gather(*(one(*j) for j in jobs))
    url = chain.base.replace("http://", "ws://", 1) + "/v1/responses"
    async with (
        aiohttp.ClientSession(trust_env=False) as s,
        s.ws_connect(url, headers={"authorization": f"Bearer {KEYS[0]}"}) as ws,
    ):
        for i, scenario in enumerate(["stop", "max_tokens_text"]):
            create = {"type": "response.create", "model": MODELS[0],
                      "input": [{"role": "user", "content": f"Go. [scenario:{scenario}] [conv:pmws{i}]"}]}  # fmt: skip
            await ws.send_str(orjson.dumps(create).decode())
            while True:
                m = orjson.loads((await asyncio.wait_for(ws.receive(), TIMEOUT)).data)
                if m.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                    break
    return len(jobs) + 2


def load_yaml(path: Path):
    from ruamel.yaml import YAML  # mitmproxy's own YAML library

    return YAML(typ="safe").load(path.read_text())


def source_of(verdict: dict) -> str:
    """Written here from docs/operations.md: a gateway's own signal is 'native'; otherwise the
    first evidence that says the outcome; 'none' without one."""
    if verdict["native"]:
        return "native"
    says = [e["source"] for e in verdict["evidence"] if e["says"] == verdict["outcome"]]
    return says[0] if says else "none"


@needs_prometheus
async def test_prometheus_scrapes_the_numbers_of_the_turn_log(stack, request):
    chain, prom = stack, stack.prom
    show_logs_on_failure(request, chain.procs)
    n = await run_turns(chain)
    chain.mitm.wait_for(r"WebSocket turn 2", TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while len(chain.turns.read_bytes().splitlines()) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    turns = [orjson.loads(x) for x in chain.turns.read_bytes().splitlines()]
    assert len(turns) == n
    prom.wait("sum(streamfix_turns_total)", n)

    # the bounds, applied by hand in the log's order: labelled keys and "-" keep their name,
    # the first key id seen gets a series, later ones are "other"; only MODELS[0] is listed
    first_id = next(t["key"] for t in turns if t["key"] not in ("team-three", "-"))
    key_of = lambda k: k if k in ("team-three", "-", first_id) else "other"
    model_of = lambda m: m if m == MODELS[0] else "other"
    assert {t["key"] for t in turns} == {redact.key_id(KEYS[0]), redact.key_id(KEYS[1]), "team-three"}

    want_turns = Counter((t["api"], t["transport"], t["ended"], model_of(t["model"])) for t in turns)
    got = prom.values("sum by (api, transport, ended, model) (streamfix_turns_total)",
                      "api", "transport", "ended", "model")  # fmt: skip
    assert got == {k: float(v) for k, v in want_turns.items()}
    assert {k[1] for k in got} == {"sse", "websocket"} and {k[2] for k in got} >= {"complete", "truncated"}

    want_tokens: dict[tuple, float] = defaultdict(float)
    for t in turns:
        for leg in ("client", "upstream"):
            for field, kind in (("input_tokens", "input"), ("output_tokens", "output"), ("cached_tokens", "cached")):
                v = (t["tokens"][leg] or {}).get(field)
                if v:
                    want_tokens[(leg, kind, key_of(t["key"]), model_of(t["model"]))] += v
    got = prom.values("sum by (leg, kind, key, model) (streamfix_tokens_total)", "leg", "kind", "key", "model")
    assert got == dict(want_tokens)
    assert {k[0] for k in got} == {"client", "upstream"} and {k[2] for k in got} == {"team-three", first_id, "other"}

    want_rules: Counter = Counter()
    for t in turns:
        for rule, c in t["rules"].items():
            want_rules[(t["api"], rule)] += c
    assert prom.values("sum by (api, rule) (streamfix_rule_events_total)", "api", "rule") == {
        k: float(v) for k, v in want_rules.items()
    }
    want_verdicts = Counter((t["api"], t["verdict"]["outcome"], source_of(t["verdict"])) for t in turns if t["verdict"])
    assert prom.values("sum by (api, outcome, source) (streamfix_verdicts_total)", "api", "outcome", "source") == {
        k: float(v) for k, v in want_verdicts.items()
    }
    assert any(k[2] == "upstream" for k in want_verdicts)  # Devin's StopReason decided some

    for name, field in (("streamfix_ttfb_seconds", "ttfb_ms"), ("streamfix_turn_duration_seconds", "duration_ms")):
        have = [t[field] for t in turns if t[field] is not None]
        assert prom.values(f"sum({name}_count)")[()] == len(have)
        assert prom.values(f"sum({name}_sum)")[()] == pytest.approx(sum(have) / 1000, abs=1e-6)
    assert prom.values("sum(streamfix_label_overflow_total) by (label)", "label") == {
        ("key",): float(sum(key_of(t["key"]) == "other" for t in turns)),
        ("model",): float(sum(model_of(t["model"]) == "other" for t in turns)),
    }
    assert prom.values("sum(streamfix_streams_in_flight) by (transport)", "transport") == {
        ("sse",): 0.0, ("websocket",): 0.0}  # fmt: skip
    assert prom.values("streamfix_requests_in_flight")[()] == 0
    assert prom.values("streamfix_draining")[()] == 0
    assert prom.values("streamfix_gateway_last_answer_timestamp_seconds")[()] > time.time() - 300
    assert prom.values("sum(streamfix_failed_open_total)") in ({}, {(): 0.0})  # no failure on this chain

    # the rules: loaded, every one evaluated without error; recording rules made series
    end = time.monotonic() + TIMEOUT
    while True:
        groups = httpx.get(f"{prom.base}/api/v1/rules", timeout=10, trust_env=False).json()["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        if rules and all(not r["lastEvaluation"].startswith("0001") for r in rules):
            break
        assert time.monotonic() < end, rules
        await asyncio.sleep(0.5)
    assert {g["name"] for g in groups} == {"streamfix.recording", "streamfix.alerts"}
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
    assert len(rules) >= 12
    while not (prom.query("streamfix:turns:rate5m") and prom.query("streamfix:tokens:rate5m")):
        assert time.monotonic() < end + TIMEOUT, "the recording rules made no series"
        await asyncio.sleep(0.5)

    # every dashboard query runs on this Prometheus
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    subst = {"$job": "streamfix", "$instance": ".*", "$__rate_interval": "1m", "$__range": "5m"}
    for e in exprs:
        q = e
        for k, v in subst.items():
            q = q.replace(k, v)
        prom.query(q)  # asserts success


async def test_dashboard_and_rules_name_only_metrics_the_sidecar_exposes(stack, request):
    chain = stack
    show_logs_on_failure(request, chain.procs)
    text = httpx.get(chain.metrics + "/metrics", timeout=10, trust_env=False).text
    exposed = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", text, re.MULTILINE))
    # a labelled family without series yet is exposed by its TYPE line
    for name, typ in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        exposed |= {name + s for s in ("_bucket", "_sum", "_count")} if typ == "histogram" else {name}
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    rules = [r["expr"] for g in load_yaml(RULES)["groups"] for r in g["rules"]]
    named = set(re.findall(r"\b((?:streamfix|process)_[a-z_]+)\b", " ".join(exprs + rules)))
    assert named, "no metric names found"
    missing = {n for n in named if n not in exposed}
    assert missing == set(), f"named but not exposed: {missing}"
    assert {"streamfix_turns_total", "streamfix_tokens_total", "streamfix_ttfb_seconds_bucket",
            "streamfix_streams_in_flight"} <= named  # fmt: skip


@pytest.mark.skipif(PROMTOOL is None, reason="no promtool (Debian's prometheus package ships it)")
def test_promtool_checks_the_rules():
    r = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr
