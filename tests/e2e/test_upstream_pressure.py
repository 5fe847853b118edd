"""The upstream leg under pressure: 200 provider streams at once through one real mitmdump.

    200 clients (as CPA calls its providers: through the regular listener, plain HTTP)
        -> mitmdump --mode regular -s addons/upstream.py
           (streamfix_upstream_hosts=127.0.0.1: every call decoded)
        -> tests/support/standins/fake_upstreams.py (Gemini, Anthropic, OpenAI chat, Codex
           Responses and Interactions streams, paced)

Nothing is lost: every client's body is byte for byte what the provider sent (fetched
directly for comparison); every call is decoded and recorded once, each with its own
outcome; the proxy keeps serving. ``STREAMFIX_UPSTREAM_PRESSURE=N`` changes the count.
"""

from __future__ import annotations

import asyncio
import os
import re

import aiohttp
import orjson
import pytest
import upstream_matrix as um
from standins import fake_upstreams as fu
from support import ROOT, Proc, child_env, free_port, show_logs_on_failure, tool

pytestmark = pytest.mark.e2e
N = int(os.environ.get("STREAMFIX_UPSTREAM_PRESSURE", "200"))
CALLS = {
    # provider: (path, request body maker, outcome of each kind)
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    "anthropic": "/v1/messages?beta=true",
    "openai_chat": "/v1/chat/completions",
    "responses": "/codex/responses",
    "interactions": "/v1beta/interactions",
}
KINDS = {"text_tool": "complete", "max_tokens": "max_tokens", "error": "failed", "no_finish": "failed"}
_CREATED = re.compile(rb'"created":\d+')


def body_for(provider: str, kind: str, conv: int) -> bytes:
    text = um.prompt(kind, conv)
    if provider == "gemini":
        return orjson.dumps({"contents": [{"role": "user", "parts": [{"text": text}]}]})
    if provider == "interactions":
        return orjson.dumps({"model": "gemini-2.5-pro", "stream": True, "input": text})
    if provider == "responses":
        return orjson.dumps({"model": "gpt-5-codex", "stream": True, "input": [{"role": "user", "content": text}]})
    return orjson.dumps(
        {"model": "m", "stream": True, "max_tokens": 4096, "messages": [{"role": "user", "content": text}]}
    )


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    d = tmp_path_factory.mktemp("uppressure")
    fakes = fu.Running(delay_ms=5)
    port = free_port()
    mitm = Proc([tool("mitmdump"), "--mode", f"regular@127.0.0.1:{port}", "--set", f"confdir={d / 'conf'}",
                 "--set", "flow_detail=0",
                 "-s", str(ROOT / "addons" / "upstream.py"), "--set", "streamfix_upstream_hosts=127.0.0.1",
                 "--set", "connection_strategy=lazy"], env=child_env())  # fmt: skip
    try:
        mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{port}\b", 60)
        yield fakes, mitm, f"http://127.0.0.1:{port}"
    finally:
        mitm.stop()
        fakes.stop()


async def _get(session: aiohttp.ClientSession, url: str, body: bytes, proxy: str | None) -> tuple[int, bytes]:
    async with session.post(url, data=body, proxy=proxy, headers={"content-type": "application/json"},
                            timeout=aiohttp.ClientTimeout(total=120)) as r:  # fmt: skip
        return r.status, await r.read()


def test_two_hundred_concurrent_upstream_streams_lose_nothing(proxy, request):
    fakes, mitm, proxy_url = proxy
    show_logs_on_failure(request, {"mitmdump": mitm})
    combos = [(p, k) for p in CALLS for k in KINDS]
    cells = [(*combos[n % len(combos)], n) for n in range(N)]
    n0 = len(mitm.lines)

    async def run():
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn) as s:
            via = await asyncio.gather(
                *(_get(s, fakes.url + CALLS[p], body_for(p, k, n), proxy_url) for p, k, n in cells)
            )
            direct = await asyncio.gather(
                *(_get(s, fakes.url + CALLS[p], body_for(p, k, n), None) for p, k, n in cells)
            )
        return via, direct

    via, direct = asyncio.run(run())
    lost = [(p, k, n) for (p, k, n), a, b in zip(cells, via, direct, strict=True)
            if a[0] != b[0] or _CREATED.sub(b"", a[1]) != _CREATED.sub(b"", b[1])]  # fmt: skip
    assert lost == [], f"{len(lost)} of {N} bodies differ from the provider's: {lost[:5]}"
    assert all(b[0] == 200 and b[1] for b in direct)
    # every call decoded and recorded once, with its own outcome
    want = len(cells)
    try:
        mitm.wait_count(r"streamfix: upstream /", want, timeout=30, start=n0)
    except TimeoutError:
        pass
    lines = [ln for ln in mitm.lines[n0:] if "streamfix: upstream /" in ln]
    assert len(lines) == want, f"{len(lines)} upstream lines for {want} calls"
    outcomes: dict[str, int] = {}
    for ln in lines:
        m = re.search(r"; outcome (\w+)", ln)
        assert m, ln
        outcomes[m.group(1)] = outcomes.get(m.group(1), 0) + 1
    expected: dict[str, int] = {}
    for _p, k, _n in cells:
        expected[KINDS[k]] = expected.get(KINDS[k], 0) + 1
    assert outcomes == expected
    assert not [ln for ln in mitm.lines[n0:] if "Traceback" in ln or "decoder failed" in ln]
