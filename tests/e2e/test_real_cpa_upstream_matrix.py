"""The upstream leg for every provider, through REAL CPA builds.

    client -> sidecar (client leg) -> real CPA v7.2.89 / v7.2.140
        -> proxy-url = the sidecar's regular listener (upstream leg, streamfix_upstream_hosts=127.0.0.1)
        -> fake providers (tests/support/standins/fake_upstreams.py): Anthropic, Gemini (AI Studio and
           Vertex paths), Gemini Interactions, OpenAI chat, Codex Responses

Every provider path x client API (Responses over SSE and WebSocket, chat, messages,
Gemini) x turn kind (text then tool, thoughts, parallel calls, max tokens, safety,
refusal, context window, in-band error, body ended without a finish, body cut inside a
chunk), raw and through both legs (tests/support/upstream_matrix.py). Raw, each build's defects
are asserted as measured (the provider's truth lost); through both legs every client hears
the provider's truth: no failure reported as success, no truncation, safety or refusal
stop reported as a normal end, usage equal to the provider's.

Without the binaries (CI: the Go module proxy refuses CPA) the module skips with one line.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import aiohttp
import pytest
import realcpa
import upstream_matrix as um
from standins import fake_upstreams as fu
from support import show_logs_on_failure

pytestmark = pytest.mark.e2e
VERSIONS = ("v7.2.89", "v7.2.140")


@pytest.fixture(scope="module")
def fakes():
    f = fu.Running()
    yield f
    f.stop()


class Stacks:
    def __init__(self, fakes, tmp: Path) -> None:
        self.fakes = fakes
        self.tmp = tmp
        self.by: dict[str, um.Stack] = {}

    def get(self, request, version: str) -> um.Stack:
        if realcpa.binary(version) is None:
            pytest.skip(realcpa.missing_reason(version))
        st = self.by.get(version)
        if st is None:
            st = self.by[version] = um.start(version, self.fakes, self.tmp / version / "conf")
        show_logs_on_failure(request, {f"{k} {version}": p for k, p in st.procs.items()})
        return st

    def stop(self) -> None:
        for st in self.by.values():
            st.stop()


@pytest.fixture(scope="module")
def stacks(fakes, tmp_path_factory):
    s = Stacks(fakes, tmp_path_factory.mktemp("upmatrix"))
    yield s
    s.stop()


def _bad(results) -> dict[str, str]:
    return {"/".join(k): um.cell(*v) for k, v in results.items() if um.cell(*v) != "ok"}


# What each build does raw, measured: tests/support/upstream_matrix.py (RAW_BOTH, RAW_89, RAW_140),
# which the CI replay of the captures (tests/addons/test_real_cpa_upstream_replay.py) reads too.
raw_expected = um.raw_expected
_normalized = um.normalized


@pytest.mark.parametrize("version", VERSIONS)
def test_every_provider_api_and_turn_through_both_legs(stacks, request, record_property, version):
    """Through both legs every cell is the provider's truth; raw, the build's defects."""
    st = stacks.get(request, version)
    legs = asyncio.run(um.run_matrix(st, legs=True))
    raw = asyncio.run(um.run_matrix(st, legs=False))
    record_property("terminal_summary", um.table(raw, f"{version} raw") + "\n" + um.table(legs, f"{version} both legs"))
    assert len(legs) == len(raw) == len(um.cells()), "every applicable cell ran"
    assert _bad(legs) == {}, um.table(legs, f"{version} both legs")
    want = _normalized(raw_expected(version))
    got = _normalized(_bad(raw))
    assert got == want, (
        f"raw cells that differ from the measured table: {sorted(set(got.items()) ^ set(want.items()))}\n"
        + um.table(raw, f"{version} raw")
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_cell_when_the_provider_pauses_before_its_last_frame(stacks, request, version):
    """The provider pauses 150 ms before its last frame ([DONE], message_stop, the terminal
    event): whatever CPA writes its client on the frames before (its OpenAI -> Claude
    translator writes message_delta and message_stop on chat's usage chunk) reaches the
    client leg while the provider's stream is still open. Through both legs every cell is
    still the provider's truth: the decisive event is recorded before CPA reads it."""
    st = stacks.get(request, version)
    stacks.fakes.fake.last_pause_ms = 150
    try:
        legs = asyncio.run(um.run_matrix(st, legs=True))
    finally:
        stacks.fakes.fake.last_pause_ms = 0
    assert _bad(legs) == {}, um.table(legs, f"{version} both legs, a pause before the last frame")


@pytest.mark.parametrize("version", VERSIONS)
def test_json_bodies_through_both_legs(stacks, request, version):
    """Non-streaming requests (CPA calls the provider's JSON endpoint or aggregates a stream):
    the truncation, safety and refusal stops and the usage, in each API's JSON."""
    st = stacks.get(request, version)
    legs = asyncio.run(um.run_matrix(st, legs=True, apis=um.JSON_APIS, kinds=um.JSON_KINDS, stream=False))
    raw = asyncio.run(um.run_matrix(st, legs=False, apis=um.JSON_APIS, kinds=um.JSON_KINDS, stream=False))
    assert len(legs) == len(raw) == len(um.json_cells())
    # CPA's own invalid JSON bodies (um.JSON_BROKEN) go out as they came
    assert _bad(legs) == um.JSON_BROKEN, um.table(legs, f"{version} JSON, both legs")
    assert _normalized(_bad(raw)) == _normalized(um.raw_json_expected(version)), um.table(raw, f"{version} JSON, raw")


def _log_lines(st: um.Stack, n: int, pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return [ln for ln in st.mitm.lines[n:] if rx.search(ln)]


@pytest.mark.parametrize("version", VERSIONS)
def test_twenty_concurrent_conversations_on_mixed_providers(stacks, request, version):
    """20 conversations at once, each on its own provider, API and turn kind, each with its
    own usage (input 1000 + its number): every one hears its own provider's stop and numbers."""
    st = stacks.get(request, version)
    aliases = list(um.PROVIDERS)
    apis = ("responses", "chat", "messages", "gemini", "responses_ws")
    kinds = ("max_tokens", "text_tool", "safety", "thoughts")
    cells = []
    for n in range(20):
        alias, api, kind = aliases[n % len(aliases)], apis[n % len(apis)], kinds[n % len(kinds)]
        if not um.applies(alias, kind):
            kind = "max_tokens"
        cells.append((n + 100, alias, api, kind))

    async def run():
        async with aiohttp.ClientSession() as s:
            return await asyncio.gather(*(um.turn(s, st.url(True), api, a, k, conv) for conv, a, api, k in cells))

    results = asyncio.run(run())
    bad = {}
    for (conv, alias, api, kind), (status, body) in zip(cells, results, strict=True):
        got = um.truth(api, status, body)
        want = um.expected(alias, kind, conv)
        if um.cell(got, want) != "ok" or got["input"] != want["input"]:
            bad[f"{conv} {alias}/{api}/{kind}"] = (got, want)
    assert bad == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_retried_call_is_matched_to_the_retry(stacks, request, version, tmp_path):
    """The provider answers the first call 503; CPA tries again (request-retry: 1, two keys per
    provider: v7.2.89 fails over to the other key, v7.2.140 retries) and the second call's
    truth (a MAX_TOKENS stop, its usage) reaches the client; the failed call decides nothing."""
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    st = stacks.get(request, version)
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    retry = um.start(version, stacks.fakes, d / "conf", retries=1)
    show_logs_on_failure(request, {f"{k} retry": p for k, p in retry.procs.items()})
    try:
        for alias, api in (("up-gemini", "responses"), ("up-claude", "chat"), ("up-openai", "messages")):
            provider = um.PROVIDER_OF[alias]
            stacks.fakes.fake.fail_next[provider] = 1
            stacks.fakes.fake.requests.clear()  # (a bounded deque: an index into it moves once it is full)
            seen = 0
            n = len(retry.mitm.lines)

            async def one(alias=alias, api=api):
                async with aiohttp.ClientSession() as s:
                    return await um.turn(s, retry.url(True), api, alias, "max_tokens", 7)

            status, body = asyncio.run(one())
            calls = [r for r in list(stacks.fakes.fake.requests)[seen:] if r["api"] == provider]
            assert len(calls) == 2, calls
            got = um.truth(api, status, body)
            assert um.cell(got, um.expected(alias, "max_tokens", 7)) == "ok", (alias, api, got, body[-600:])
            assert _log_lines(retry, n, r"upstream \w+ call answered HTTP 503"), retry.mitm.lines[n:]
    finally:
        retry.stop()
    assert st is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_call_failed_over_to_another_provider_is_matched_to_the_one_that_answered(stacks, request, version, tmp_path):
    """One model served by two providers (Gemini and Anthropic entries, two keys each,
    request-retry 3). The first calls answer 503; CPA moves on, across providers (measured:
    v7.2.89 tries the other key first, then the other provider; v7.2.140 alternates
    providers) until one answers a MAX_TOKENS turn. Every turn's client hears that call's
    truth, its receipt names the provider that answered, and the 503s decide nothing."""
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    both = um.start(version, stacks.fakes, d / "conf", retries=3, primary=("up-gemini", "up-claude"))
    show_logs_on_failure(request, {f"{k} failover": p for k, p in both.procs.items()})
    alias_of = {"gemini": "up-gemini", "anthropic": "up-claude"}
    name_of = {"gemini": "Gemini finishReason MAX_TOKENS", "anthropic": "Anthropic stop_reason max_tokens"}
    crossed = []
    try:
        for conv in range(40, 44):
            stacks.fakes.fake.fail_next.update({"anthropic": 2, "gemini": 1})
            stacks.fakes.fake.requests.clear()  # (a bounded deque: an index into it moves once it is full)
            seen, n = 0, len(both.mitm.lines)

            async def one(conv=conv):
                async with aiohttp.ClientSession() as s:
                    return await um.turn(s, both.url(True), "responses", realcpa.MODEL, "max_tokens", conv)

            status, body = asyncio.run(one())
            calls = [r["api"] for r in list(stacks.fakes.fake.requests)[seen:] if r["conv"] == conv]
            assert len(calls) >= 2 and set(calls) <= set(alias_of), calls
            got = um.truth("responses", status, body)
            assert um.cell(got, um.expected(alias_of[calls[-1]], "max_tokens", conv)) == "ok", (calls, got, body[-600:])
            failed = _log_lines(both, n, r"upstream \w+ call answered HTTP 503")
            assert len(failed) == len(calls) - 1, (calls, both.mitm.lines[n:])
            both.mitm.wait_for(r"POST /v1/responses: .*why: upstream: ", 10, n)  # (written as the flow ends)
            said = _log_lines(both, n, r"POST /v1/responses: .*why: upstream: ")
            assert len(said) == 1 and name_of[calls[-1]] in said[0], (calls, said)
            if len(set(calls)) == 2:
                crossed.append(calls)
        assert crossed, "no turn failed over to the other provider"
    finally:
        both.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_call_the_sidecar_never_sees_falls_back_to_the_client_leg(stacks, request, version, tmp_path):
    """A provider entry that bypasses the sidecar (proxy-url: direct): its turns are decided by
    the client-leg rules alone, at once (no wait for an upstream record that never comes)."""
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    direct = um.start(version, stacks.fakes, d / "conf", direct=True)
    show_logs_on_failure(request, {f"{k} direct": p for k, p in direct.procs.items()})
    try:

        async def run():
            async with aiohttp.ClientSession() as s:
                t0 = asyncio.get_running_loop().time()
                out = []
                for api in ("responses", "chat", "messages", "gemini"):
                    out.append((api, await um.turn(s, direct.url(True), api, "up-gemini", "max_tokens", 8)))
                return out, asyncio.get_running_loop().time() - t0

        out, took = asyncio.run(run())
        n_upstream = _log_lines(direct, 0, r"streamfix: upstream /")
        assert n_upstream == [], n_upstream
        for api, (status, body) in out:
            got = um.truth(api, status, body)
            # no upstream evidence: what the client-leg rules make of CPA's stream (CPA's own
            # max_tokens on chat is mapped to length; elsewhere a text-only MAX_TOKENS stays as CPA said)
            assert status == 200 and got["ended"] in ("complete", "max_tokens"), (api, got)
        assert took < 20, f"four turns took {took:.1f} s"
    finally:
        direct.stop()


@pytest.mark.parametrize("version", ["v7.2.140"])
def test_the_evidence_reaches_the_turn_log_and_the_flows(stacks, request, version, tmp_path):
    """The provider's truth in the turn log (ended, verdict evidence, tokens.upstream) and
    in the receipt line naming the provider flow that decided the client flow."""
    import json

    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    log = tmp_path / "turns.jsonl"
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    st = um.start(version, stacks.fakes, d / "conf", extra=["--set", f"streamfix_log={log}"])
    show_logs_on_failure(request, {f"{k} turnlog": p for k, p in st.procs.items()})
    try:

        async def run():
            async with aiohttp.ClientSession() as s:
                a = await um.turn(s, st.url(True), "responses", "up-gemini", "cut", 31)
                b = await um.turn(s, st.url(True), "chat", "up-gemini", "thoughts", 32)
                return a, b

        asyncio.run(run())
        st.mitm.wait_count(r"streamfix: POST /v1/", 2, timeout=20)
        deadline = 20
        import time

        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline and (not log.exists() or len(log.read_text().splitlines()) < 2):
            time.sleep(0.2)
        turns = [json.loads(ln) for ln in log.read_text().splitlines()]
    finally:
        st.stop()
    cut = next(t for t in turns if t["path"] == "/v1/responses")
    assert cut["ended"] == "upstream_error"
    assert cut["verdict"]["outcome"] == "failed"
    assert cut["verdict"]["evidence"][0]["source"] == "upstream"
    assert cut["verdict"]["evidence"][0]["detail"].startswith("Gemini body cut")
    thoughts = next(t for t in turns if t["path"] == "/v1/chat/completions")
    up = thoughts["tokens"]["upstream"]
    want = um.expected("up-gemini", "thoughts", 32)
    assert (up["output_tokens"], up["reasoning_tokens"], up["input_tokens"]) == (
        want["output"],
        fu.THOUGHT_TOKENS,
        want["input"],
    )
    assert thoughts["tokens"]["client"]["output_tokens"] == want["output"]  # what the client was told: the provider's
    lines = [ln for ln in st.mitm.lines if "streamfix: POST /v1/responses" in ln]
    assert any("upstream flow " in ln and "why: upstream: Gemini body cut" in ln for ln in lines), lines


@pytest.mark.parametrize("version", VERSIONS)
def test_the_captures_are_what_the_build_does(stacks, request, version, tmp_path):
    """recordings/real-cpa-upstream/ (replayed in CI through both legs:
    tests/addons/test_real_cpa_upstream_replay.py) still says what the build does: every
    captured cell run again live, raw, through both legs and straight to the CPA behind the
    upstream leg, gives the outcomes the capture recorded (how the turn ended, what was said,
    the usage; not the bytes: ids and timestamps differ)."""
    import upstream_recordings as ur

    st = stacks.get(request, version)
    cap = um.start(version, stacks.fakes, Path(tempfile.mkdtemp(dir=tmp_path)) / "conf")  # the capture's own sidecar
    show_logs_on_failure(request, {f"{k} capture": p for k, p in cap.procs.items()})
    cells = [c for c in ur.load() if c.key[0] == version]
    assert {c.key for c in cells} == ur.expected_keys([version])

    async def one(c: ur.Cell, sem: asyncio.Semaphore):
        alias, api, kind = c.key[1], c.api, c.key[3]
        async with sem:
            for _attempt in range(ur.ATTEMPTS):  # CPA is not deterministic everywhere (ur.ATTEMPTS)
                got = await ur.run_cell(st, cap, stacks.fakes, alias, api, kind, c.stream)
                turn = got["capture"]
                now = {"raw": got["raw"], "captured": um.truth(api, turn["status"], ur.client_view(turn), c.stream),
                       "legs": got["legs"]}  # fmt: skip
                if now == c.meta["outcome"]:
                    return None
            return "/".join(c.key), now, c.meta["outcome"]

    async def run():
        sem = asyncio.Semaphore(6)
        return [d for d in await asyncio.gather(*(one(c, sem) for c in cells)) if d is not None]

    try:
        diffs = asyncio.run(run())
    finally:
        cap.stop()
    assert diffs == [], (
        f"{len(diffs)} cells differ from the capture (python tests/support/upstream_recordings.py capture): {diffs[:5]}"
    )
