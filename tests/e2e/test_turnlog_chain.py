"""The turn log and redaction on the whole chain (real processes, see tests/e2e/test_full_chain.py):

50 concurrent turns on chat, Responses and messages, from three client keys, through one
mitmdump with a turn log, ``-w`` and ``flow_detail=2``. Afterwards:

* the turn log has exactly one well-formed JSON line per turn, with the key's id (never
  the key), the API, the ending its Devin StopReason implies, and upstream and client
  token counts equal to what the fake Devin sent (computed here from its script, not read
  back from the sidecar);
* no secret (the clients' keys, the gateway's Devin token in the Authorization header
  and in the request body) is in the saved flows, the turn log or mitmdump's output.
"""

from __future__ import annotations

import asyncio
import itertools
from io import BytesIO

import httpx
import orjson
import pytest
from chain import PATHS, TIMEOUT, Chain, request_body
from mitmproxy import io
from standins.cpa_standin import build_request
from standins.fake_devin import CHARS_PER_TOKEN, apply_cap, script_for
from streamfix.wire import redact
from support import show_logs_on_failure

pytestmark = pytest.mark.e2e

KEYS = ["sk-alpha-SECRET-0001", "sk-beta-SECRET-0002", "sk-gamma-SECRET-0003"]
DEVIN_SECRETS = ["standin-token", "standin-session-token"]
"""What the CPA stand-in authenticates to Devin with (header and GetChatMessageRequest 1.3)."""
ENDING = {"stop": "complete", "tool": "complete", "max_tokens": "truncated", "max_tokens_text": "truncated",
          "content_filter": "truncated"}  # fmt: skip


def expected_upstream(api: str, body: dict, scenario: str, conv: str) -> dict:
    """The usage the fake Devin reports for this request (its own rules, tests/support/standins/fake_devin.py)."""
    req = build_request(api, body)
    prompt = sum(len(p.prompt) for p in req.prompts) // CHARS_PER_TOKEN + 10
    cap = req.configuration.max_tokens
    if api == "messages":
        cap = min(cap, body["max_tokens"])  # the sidecar patches CPA's dropped cap back in
    _, out = apply_cap(script_for(scenario, conv), cap)
    cached = prompt // 2
    return {"input_tokens": prompt + cached, "output_tokens": out, "cached_tokens": cached,
            "total_tokens": prompt + cached + out}  # fmt: skip


@pytest.fixture(scope="module")
def logged_chain(tmp_path_factory):
    d = tmp_path_factory.mktemp("turnchain")
    c = Chain(d)
    c.turns = d / "turns.jsonl"
    c.saved = d / "flows.mitm"
    c.extra = ["--set", f"streamfix_log={c.turns}", "-w", str(c.saved),
               "--set", f"streamfix_key_labels={redact.key_id(KEYS[2])}=gamma"]  # fmt: skip
    c.flow_detail = 2  # headers in mitmdump's output: they must be redacted there too
    try:
        yield c.up()
    finally:
        c.down()


async def test_fifty_concurrent_turns_logged_and_nothing_secret_stored(logged_chain, request):
    chain = logged_chain
    show_logs_on_failure(request, chain.procs)
    scenarios = ["stop", "tool", "max_tokens", "max_tokens_text", "content_filter"]
    apis = ["chat", "responses", "messages"]
    jobs = []
    for i, (api, scenario) in enumerate(itertools.islice(itertools.cycle(itertools.product(apis, scenarios)), 50)):
        conv = f"tl{i:02d}-{api}-{scenario}"
        body = request_body(api, f"Please do it. [scenario:{scenario}] [conv:{conv}] [delay:10]")
        jobs.append((api, scenario, conv, body, KEYS[i % 3]))

    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:

        async def one(api, body, key):
            r = await c.post(chain.base + PATHS[api], json=body, headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
            return r.content

        await asyncio.gather(*(one(api, body, key) for api, _, _, body, key in jobs))

    chain.mitm.wait_count(r"streamfix: upstream GetChatMessage", 50, TIMEOUT)
    chain.mitm.stop()  # flushes -w and the turn log (done hooks)

    lines = chain.turns.read_bytes().splitlines()
    assert len(lines) == 50
    turns = [orjson.loads(line) for line in lines]  # each line is one JSON object
    by_conv = {}
    for t in turns:
        assert t["flow"] not in by_conv
        by_conv[t["flow"]] = t
    assert len({t["flow"] for t in turns}) == 50

    # match each turn to its job by the Devin output it counted (unique per conversation)
    want = {}
    for api, scenario, conv, body, key in jobs:
        up = expected_upstream(api, body, scenario, conv)
        label = "gamma" if key == KEYS[2] else redact.key_id(key)
        want.setdefault((api, ENDING[scenario], label, up["output_tokens"], up["input_tokens"]), []).append(up)
    for t in turns:
        up = t["tokens"]["upstream"]
        assert up is not None, t
        k = (t["api"], t["ended"], t["key"], up["output_tokens"], up["input_tokens"])
        assert want.get(k), f"unexpected turn {k}: {t}"
        exp = want[k].pop()
        assert {n: up[n] for n in exp} == exp
        # and the client was told the same numbers (CPA copies Devin's usage; streamfix's
        # usage rule fills what it leaves out); CPA's messages usage has no cache fields
        told = t["tokens"]["client"] or {}
        assert {n: told.get(n) for n in ("input_tokens", "output_tokens", "total_tokens")} == {
            n: exp[n] for n in ("input_tokens", "output_tokens", "total_tokens")
        }, (t["api"], t["tokens"])
        assert told.get("cached_tokens", exp["cached_tokens"]) == exp["cached_tokens"]  # messages: not told
        assert t["model"] == "devin/swe-2" and t["status"] == 200 and t["transport"] == "sse"
        assert t["upstream_model"] == "swe-fake"  # what the fake Devin reports in usage field 7.9
        assert t["verdict"] is not None and t["bytes"]["in"] > 0 and t["events"] > 0
        assert t["ttfb_ms"] is not None and t["duration_ms"] >= t["ttfb_ms"]
    assert not any(want.values())

    flows = list(io.FlowReader(BytesIO(chain.saved.read_bytes())).stream())
    assert len(flows) >= 100  # 50 client flows + 50 Devin calls
    outputs = {
        "saved flows": chain.saved.read_bytes(),
        "turn log": chain.turns.read_bytes(),
        "mitmdump output": chain.mitm.output.encode(),
    }
    for where, data in outputs.items():
        for secret in KEYS + DEVIN_SECRETS:
            assert secret.encode() not in data, f"{secret} in the {where}"
    devin = [f for f in flows if f.request.path.endswith("GetChatMessage")]
    assert len(devin) == 50 and all(f.request.headers["authorization"].startswith("Basic <redacted:") for f in devin)
    client = [f for f in flows if f.request.path in PATHS.values()]
    assert {f.request.headers["authorization"] for f in client} == {
        f"Bearer <redacted:{redact.key_id(k)}>" for k in KEYS
    }

    # the live requests kept their credentials: redaction is for what is stored and shown
    seen = [r for r in chain.seen() if r["conv"].startswith("tl")]
    assert len(seen) == 50 and all(r["authorization"] for r in seen)
