"""The whole chain, real processes on 127.0.0.1:

    client -> mitmdump reverse listener (addons/repair.py: client leg)
           -> CPA stand-in (python tests/support/standins/cpa_standin.py: an unfixed CPA's Devin path)
           -> mitmdump regular listener (addons/upstream.py: upstream leg), as CPA's proxy-url
           -> fake Devin (python tests/support/standins/fake_devin.py: Connect-RPC, scripted StopReasons)

One mitmdump process with both listeners, as in production. Host names (``standin.test``,
``plain.devin.test``, ``tls.devin.test``, ``other.test``) are mapped to local ports inside
mitmdump by ``tests/support/e2e_hostmap.py``, so the upstream-leg host filter and TLS
interception see real names. One stack per module (per xdist worker); every wait is
bounded; everything is stopped at teardown.

The terminal the client gets is checked for every StopReason on chat, Responses and
messages; ``max_tokens_text`` and ``content_filter`` turns can only be told by Devin's
StopReason (nothing on the client leg shows them), so they prove the two legs were
matched, also with many conversations at once.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid

import httpx
import orjson
import pytest
from chain import (
    EXPECT,
    GEMINI_JSON,
    PATHS,
    REPAIR,
    TIMEOUT,
    Chain,
    client_usage,
    request_body,
    terminal,
)
from standins.cpa_standin import build_request
from streamfix.wire.connect import encode_frame
from streamfix.wire.devin import CHAT_PATH
from support import fetch, show_logs_on_failure

pytestmark = pytest.mark.e2e

needs_wiring = pytest.mark.skipif(
    not REPAIR.exists(),
    reason="addons/repair.py (the client leg, which registers client requests with the shared "
    "correlator and sets verdict.resolver) does not exist yet",
)


@pytest.fixture(scope="module")
def chain_procs(tmp_path_factory):
    c = Chain(tmp_path_factory.mktemp("chain"))
    try:
        yield c.up()
    finally:
        c.down()


@pytest.fixture
def chain(chain_procs: Chain, request: pytest.FixtureRequest) -> Chain:
    """The module's chain; a failing test's report shows what each process printed meanwhile."""
    show_logs_on_failure(request, chain_procs.procs)
    return chain_procs


async def ask(
    client: httpx.AsyncClient,
    chain: Chain,
    api: str,
    scenario: str,
    conv: str,
    delay: int | None = None,
    cap: int | None = None,
) -> bytes:
    marks = f"[scenario:{scenario}] [conv:{conv}]" + (f" [delay:{delay}]" if delay is not None else "")
    r = await client.post(chain.base + PATHS[api], json=request_body(api, f"Please do it. {marks}", cap))
    assert r.status_code == 200, r.text
    return r.content


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)


# --- the tests --------------------------------------------------------------------------
@needs_wiring
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("scenario", ["max_tokens_text", "max_tokens", "content_filter", "tool", "stop"])
async def test_each_stop_reason_reaches_the_client(chain, api, scenario):
    async with client() as c:
        body = await ask(c, chain, api, scenario, f"single-{api}-{scenario}")
    assert terminal(api, body) == EXPECT[api][scenario], body.decode()[-600:]


@needs_wiring
async def test_concurrent_conversations_are_matched_by_content(chain):
    """21 turns at once, differing only late in the stream, whose terminals only the
    right upstream StopReason can give."""
    scenarios = ["max_tokens_text", "stop", "content_filter", "tool", "max_tokens_text", "stop", "content_filter"]
    jobs = [(api, scenarios[i], f"conc{i}-{api}") for api in ("chat", "responses", "messages") for i in range(7)]
    async with client() as c:
        bodies = await asyncio.gather(*(ask(c, chain, api, sc, conv, delay=15) for api, sc, conv in jobs))
    wrong = [
        (api, sc, terminal(api, b)) for (api, sc, _), b in zip(jobs, bodies) if terminal(api, b) != EXPECT[api][sc]
    ]
    assert not wrong


@needs_wiring
async def test_responses_max_output_tokens_reaches_devin(chain):
    conv = f"patch-{uuid.uuid4().hex[:8]}"
    start = len(chain.mitm.lines)
    async with client() as c:
        body = await ask(c, chain, "responses", "long", conv, cap=12)
    seen = [r for r in chain.seen() if r["conv"] == conv]
    assert [r["max_tokens"] for r in seen] == [12]  # CPA alone would have sent 128000
    assert terminal("responses", body) == ("response.incomplete", "max_output_tokens")
    # the log line may reach us after the response: wait for it (bounded)
    chain.mitm.wait_for(r"Devin max_tokens 128000 -> 12 \(client /v1/responses max_output_tokens=12\)", 10, start)


@needs_wiring
async def test_caps_on_chat_and_messages(chain):
    async with client() as c:
        await ask(c, chain, "chat", "stop", "cap-chat", cap=14)  # CPA maps it itself
        await ask(c, chain, "messages", "stop", "cap-messages", cap=15)  # CPA drops it: patched
        await ask(c, chain, "responses", "stop", "cap-none")  # no cap asked: untouched
    by_conv = {r["conv"]: r["max_tokens"] for r in chain.seen()}
    assert (by_conv["cap-chat"], by_conv["cap-messages"], by_conv["cap-none"]) == (14, 15, 128000)


async def test_upstream_leg_streams_devin_frames_without_buffering(chain):
    """Devin's envelopes reach CPA (and the client) as they are sent, not at the end."""
    body = orjson.dumps(request_body("chat", "go [scenario:long] [conv:pace] [delay:25]"))
    r = await asyncio.to_thread(fetch, chain.base + PATHS["chat"], body=body,
                                headers={"content-type": "application/json"}, timeout=TIMEOUT)  # fmt: skip
    times = r.event_times()
    assert r.status == 200 and len(times) > 40
    # ~60 envelopes 25 ms apart: events spread over more than a second, not one burst
    assert times[-1] - times[3] > 1.0


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_upstream_leg_serves_many_calls_on_one_keepalive_connection(chain, scheme):
    """CPA (Go's http.Transport) sends its Devin calls one after another over one kept-alive
    connection to the proxy: absolute-form requests for http, one CONNECT tunnel for
    https. Every call is answered at once: mitmproxy keeps using one upstream connection
    (one client connection may hold 5 per address; a sixth call would wait for one)."""
    verify = ssl.create_default_context(cafile=str(chain.mitm_ca)) if scheme == "https" else False
    url = f"{scheme}://{'plain' if scheme == 'http' else 'tls'}.devin.test{CHAT_PATH}"
    local: set = set()
    async with httpx.AsyncClient(proxy=chain.proxy, verify=verify, timeout=10, trust_env=False) as c:
        for i in range(8):
            prompt = f"x [scenario:stop] [conv:keepalive-{scheme}-{i}]"
            body = encode_frame(build_request("chat", request_body("chat", prompt)).SerializeToString())
            r = await c.post(url, content=body, headers={"content-type": "application/connect+proto"})
            assert r.status_code == 200 and f"keepalive-{scheme}-{i}".encode() in r.content
            local.add(r.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(local) == 1, "the calls did not share one connection to the proxy"


async def test_error_trailer_is_not_turned_into_success(chain):
    async with client() as c:
        body = await ask(c, chain, "responses", "error", "err1")
    assert terminal("responses", body) is None
    assert b"event: error" in body and b"resource_exhausted" in body


async def test_tls_upstream_leg_with_mitmproxys_ca(chain):
    """CPA -> sidecar -> Devin over TLS: the stand-in trusts only mitmproxy's CA (like
    SSL_CERT_FILE for Go), mitmproxy trusts the fake Devin's CA; the tap reads the frames."""
    conv = f"tls-{uuid.uuid4().hex[:8]}"
    start = len(chain.mitm.lines)
    async with client() as c:
        r = await c.post(chain.standin_tls + "/v1/responses",
                         json=request_body("responses", f"x [scenario:content_filter] [conv:{conv}]"))  # fmt: skip
    assert r.status_code == 200
    assert [s["conv"] for s in chain.seen(chain.devin_tls)].count(conv) == 1
    chain.mitm.wait_for("Devin StopReason 11 CONTENT_FILTER", 10, start)


async def test_other_hosts_are_passed_through_untouched(chain):
    """TLS to a host not in streamfix_upstream_hosts is not intercepted: the client sees
    the server's own certificate (trusting only the server's CA works), while a Devin
    host is intercepted (the same trust fails: mitmproxy's certificate is presented)."""
    only_server_ca = ssl.create_default_context(cafile=str(chain.ca))
    start = len(chain.mitm.lines)
    async with httpx.AsyncClient(proxy=chain.proxy, verify=only_server_ca, timeout=TIMEOUT, trust_env=False) as c:
        r = await c.get("https://other.test:443/_requests")
        assert r.status_code == 200
        with pytest.raises(httpx.ConnectError):
            await c.get("https://tls.devin.test:443/_requests")
    chain.mitm.wait_for("passing TLS to other.test through untouched", 10, start)


@needs_wiring
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_non_streamed_bodies_get_the_upstream_verdict(chain, api):
    """A JSON (stream: false) turn that Devin stopped for CONTENT_FILTER: only the upstream
    StopReason can tell, so the body's finish/stop reason proves the legs were matched."""
    async with client() as c:
        r = await c.post(chain.base + PATHS[api],
                         json=request_body(api, f"x [scenario:content_filter] [conv:ns-{api}]", stream=False))  # fmt: skip
    assert r.status_code == 200
    obj = r.json()
    if api == "chat":
        assert obj["choices"][0]["finish_reason"] == "content_filter"
    elif api == "responses":
        assert (obj["status"], obj["incomplete_details"]) == ("incomplete", {"reason": "content_filter"})
    else:
        assert obj["stop_reason"] == "refusal"


# --- usage: Devin's numbers reach every client ------------------------------
def devin_usage(chain: Chain, conv: str) -> tuple[int, int, int, int]:
    """What the fake Devin sent for this conversation, in CPA's mapping."""
    (u,) = [r["usage"] for r in chain.seen() if r["conv"] == conv]
    return u["input_tokens"], u["output_tokens"], u["cached_tokens"], u["input_tokens"] + u["output_tokens"]


async def ask_usage(
    c: httpx.AsyncClient,
    chain: Chain,
    api: str,
    conv: str,
    devin: str,
    cpa: str | None,
    prompt_tokens: int,
    scenario: str = "stop",
    stream: bool = True,
    delay: int | None = None,
) -> bytes:
    marks = f"[scenario:{scenario}] [conv:{conv}] [usage:{devin}] [prompt_tokens:{prompt_tokens}]"
    marks += (f" [cpa_usage:{cpa}]" if cpa else "") + (f" [delay:{delay}]" if delay is not None else "")
    body = request_body(api, f"Count it. {marks}", stream=stream)
    if api == "chat" and stream:
        body["stream_options"] = {"include_usage": True}
    path = GEMINI_JSON if (api, stream) == ("gemini", False) else PATHS[api]
    r = await c.post(chain.base + path, json=body)
    assert r.status_code == 200, r.text
    return r.content


@needs_wiring
@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
@pytest.mark.parametrize(("devin", "cpa"), [("field7", "zero"), ("field7", "omit"), ("field28", "zero"),
                                            ("field28", "omit"), ("zero7", "zero")])  # fmt: skip
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_dropped_usage_is_filled_with_devins_numbers(chain, api, devin, cpa, stream):
    """CPA dropped the usage on the client leg (zeros, or no usage object at all); Devin
    sent it in field 7, only in field 28, or as a zero field 7 plus field 28: the client
    gets Devin's numbers, every field."""
    conv = f"usage-{api}-{devin}-{cpa}-{'sse' if stream else 'json'}-{uuid.uuid4().hex[:6]}"
    async with client() as c:
        body = await ask_usage(c, chain, api, conv, devin, cpa, 1000 + len(conv), stream=stream)
    want = devin_usage(chain, conv)
    assert want[0] and want[1] and want[2]
    assert client_usage(api, body, stream) == want, body.decode()[-800:]


@needs_wiring
@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
async def test_usage_cpa_already_sent_passes_unchanged(chain, api):
    """With the usage on the client leg (CPA copied field 7, or fell back to field 28), the
    client gets exactly CPA's numbers, which are Devin's: nothing is overwritten."""
    for devin in ("field7", "field28"):
        conv = f"usage-kept-{api}-{devin}-{uuid.uuid4().hex[:6]}"
        async with client() as c:
            body = await ask_usage(c, chain, api, conv, devin, None, 1234)
        got = client_usage(api, body)
        if api == "messages":  # CPA writes its total input into input_tokens, no cache read
            inp, out, _, total = devin_usage(chain, conv)
            assert got == (inp, out, 0, total)
        else:
            assert got == devin_usage(chain, conv)


@needs_wiring
async def test_twenty_conversations_each_get_their_own_devin_usage(chain):
    """20 turns at once on every API, usage dropped by CPA, each with its own Devin
    numbers (distinct prompt sizes; field 7 or field 28): each client gets exactly its own."""
    apis = ("chat", "responses", "messages", "gemini")
    jobs = [(apis[i % 4], f"usage20-{i}-{uuid.uuid4().hex[:6]}", ("field7", "field28")[(i // 4) % 2],
             ("zero", "omit")[(i // 8) % 2], 2000 + 97 * i) for i in range(20)]  # fmt: skip
    async with client() as c:
        bodies = await asyncio.gather(*(ask_usage(c, chain, api, conv, devin, cpa, pt, delay=10)
                                        for api, conv, devin, cpa, pt in jobs))  # fmt: skip
    got = [client_usage(api, b) for (api, *_), b in zip(jobs, bodies)]
    want = [devin_usage(chain, conv) for _, conv, *_ in jobs]
    assert len(set(want)) == 20
    assert got == want


@needs_wiring
async def test_receipt_names_the_upstream_flow_that_decided_it(chain):
    """The correlator's record links the client flow to the Devin flow whose StopReason
    decided it: the receipt (log line, flow comment) names that flow's id."""
    start = len(chain.mitm.lines)
    async with client() as c:
        await ask(c, chain, "responses", "content_filter", f"link-{uuid.uuid4().hex[:8]}")
    chain.mitm.wait_for(
        r"/v1/responses: verdict content_filter; fixed [^;]*truncation 1[^;]*; why: [^\n]*upstream: [^\n]*"
        r"; upstream flow [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        10,
        start,
    )


@needs_wiring
@pytest.mark.clients
async def test_real_clients_report_devins_usage(chain):
    """AI SDK 7 (chat, Responses, Anthropic; streamText and generateText) and
    openai-python's helpers (``chat.completions.stream``, ``responses.stream``) through the
    whole chain with the usage dropped by CPA: each reports its own Devin numbers."""
    from runners import CLIENTS, run_aisdk_batch

    install = CLIENTS / "aisdk7"
    assert (install / ".streamfix-installed").exists(), "run scripts/install-clients"

    def prompt(conv: str, i: int, scenario: str = "stop") -> str:
        marks = f"[scenario:{scenario}] [conv:{conv}] [usage:field7] [prompt_tokens:{3000 + 61 * i}] [cpa_usage:omit]"
        return f"Count it. {marks}"

    cases = []
    for i, (api, stream) in enumerate((a, s) for a in ("chat", "responses", "anthropic") for s in (True, False)):
        conv = f"client-{api}-{'sse' if stream else 'json'}-{uuid.uuid4().hex[:6]}"
        # a non-streamed Anthropic message with a thinking block fails the AI SDK's schema
        # (CPA's non-stream translator writes no signature): a turn without thinking
        scenario = "content_filter" if (api, stream) == ("anthropic", False) else "stop"
        cases.append({"id": conv, "api": api, "baseURL": chain.base + "/v1", "stream": stream, "tools": [],
                      "prompt": prompt(conv, i, scenario)})  # fmt: skip
    results = await asyncio.to_thread(run_aisdk_batch, install, cases)
    for c in cases:
        r = results[c["id"]]
        u = r.get("usage") or {}
        inp, out, cached, total = devin_usage(chain, c["id"])
        got_cached = (u.get("inputTokenDetails") or {}).get("cacheReadTokens", u.get("cachedInputTokens"))
        assert (u.get("inputTokens"), u.get("outputTokens"), u.get("totalTokens"), got_cached) == (
            inp, out, total, cached), json.dumps(r)[:2000]  # fmt: skip

    import openai

    oa = openai.OpenAI(base_url=chain.base + "/v1", api_key="test-key", max_retries=0, timeout=TIMEOUT)
    chat_conv, resp_conv = (f"client-py-{k}-{uuid.uuid4().hex[:6]}" for k in ("chat", "responses"))

    def chat_final():
        with oa.chat.completions.stream(model="devin/swe-2", stream_options={"include_usage": True},
                                        messages=[{"role": "user", "content": prompt(chat_conv, 7)}]) as s:  # fmt: skip
            return s.get_final_completion()

    def responses_final():
        with oa.responses.stream(model="devin/swe-2", input=prompt(resp_conv, 8)) as s:
            return s.get_final_response()

    chat = await asyncio.to_thread(chat_final)
    inp, out, cached, total = devin_usage(chain, chat_conv)
    u = chat.usage
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens, u.prompt_tokens_details.cached_tokens) == (
        inp, out, total, cached)  # fmt: skip
    resp = await asyncio.to_thread(responses_final)
    inp, out, cached, total = devin_usage(chain, resp_conv)
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.input_tokens_details.cached_tokens) == (
        inp, out, total, cached)  # fmt: skip


@needs_wiring
async def test_websocket_turns_get_the_upstream_verdict_and_usage(chain):
    """Responses over a WebSocket (Codex's transport) on the full chain: three turns on one
    socket, each matched to its own Devin call. Text cut by Devin's MAX_TOKENS with no cap
    on the client leg (as Codex sends none: only the upstream leg can tell) ends as
    response.incomplete; a normal end stays response.completed; usage CPA dropped is
    Devin's, every field."""
    import aiohttp

    run = uuid.uuid4().hex[:6]
    plan = [("max_tokens_text", "zero"), ("stop", "zero"), ("stop", None)]
    url = chain.base.replace("http://", "ws://", 1) + "/v1/responses"
    got: list[tuple[str, list[dict]]] = []
    async with aiohttp.ClientSession(trust_env=False) as s, s.ws_connect(url) as ws:
        for i, (scenario, cpa) in enumerate(plan):
            conv = f"ws-{run}-{i}"
            marks = f"[scenario:{scenario}] [conv:{conv}] [usage:field7] [prompt_tokens:{1200 + i}]"
            marks += f" [cpa_usage:{cpa}]" if cpa else ""
            create = {"type": "response.create", "model": "devin/swe-2",
                      "input": [{"role": "user", "content": f"Count it. {marks}"}]}  # fmt: skip
            await ws.send_str(orjson.dumps(create).decode())
            msgs: list[dict] = []
            while not msgs or msgs[-1].get("type") not in ("response.completed", "response.incomplete"):
                m = await asyncio.wait_for(ws.receive(), TIMEOUT)
                assert m.type == aiohttp.WSMsgType.TEXT, (m.type, msgs[-3:])
                msgs.append(orjson.loads(m.data))
            got.append((conv, msgs))
    ends = [(msgs[-1]["type"], (msgs[-1]["response"].get("incomplete_details") or {}).get("reason")) for _, msgs in got]
    assert ends == [("response.incomplete", "max_output_tokens"), ("response.completed", None),
                    ("response.completed", None)]  # fmt: skip
    for conv, msgs in got:
        seq = [m["sequence_number"] for m in msgs]
        assert seq == sorted(set(seq)), "sequence_number strictly increasing within each turn"
        u = msgs[-1]["response"]["usage"]
        mine = (u["input_tokens"], u["output_tokens"], u["input_tokens_details"]["cached_tokens"], u["total_tokens"])
        assert mine == devin_usage(chain, conv), conv
    chain.mitm.wait_for(r"WebSocket turn 3", 10)
