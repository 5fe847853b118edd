"""Traces to a real receiver (Arize Phoenix, tests/support/receiver.py), as an operator sets them up:

* the README's launcher (``scripts/sidecar``, its demo upstream) with only
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_SERVICE_NAME`` set exports one span per turn,
  on every API, streamed and JSON, and Phoenix shows them with what each client was told
  (the finish reasons below are read off the recordings' repaired streams by hand);
* the whole chain with the upstream leg (client -> sidecar -> CPA stand-in -> sidecar ->
  fake Devin): each turn's span has the provider's call as its child, and both agree with
  the turn log's line for the turn;
* a receiver that is down changes nothing for clients: the same bytes as without traces,
  one log line, a clean exit.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import orjson
import pytest
import receiver
from chain import PATHS, TIMEOUT, Chain, request_body
from support import ROOT, Proc, child_env, free_port, show_logs_on_failure

from streamfix.recordings import load

pytestmark = pytest.mark.e2e

TOLD = {
    "chat-devin-truncated-toolcall": ("chat", ["length"], ["tool_calls"]),
    "responses-devin-toolcall": ("chat", ["completed"], ["completed"]),
    "responses-devin-nonstream": ("chat", ["completed"], ["completed"]),
    "messages-devin-truncated": ("chat", ["max_tokens"], ["tool_use"]),
    "gemini-devin-truncated": ("generate_content", ["MAX_TOKENS"], ["STOP"]),
}
"""Recording -> (operation, finish reasons its client reads after the repair, what the
gateway's stream said), read off the recordings."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith("OTEL_")}
    env.update(extra)
    return env


def launcher(tmp: Path, env: dict[str, str]) -> tuple[Proc, int]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    for attempt in range(3):
        port = free_port()
        p = Proc([str(ROOT / "scripts" / "sidecar"), "--listen", f"127.0.0.1:{port}"], env={**env, "HOME": str(home)})
        try:
            p.wait_for(rf"listening at 127\.0\.0\.1:{port}", timeout=180)
            return p, port
        except (RuntimeError, TimeoutError):
            p.stop()
            if attempt == 2 or "Address already in use" not in p.output:
                raise
    raise AssertionError("not reached")


def turn(port: int, name: str) -> bytes:
    rec = load(name)
    r = httpx.post(f"http://127.0.0.1:{port}{rec.request['path']}", content=rec.request_body,
                   headers={"content-type": "application/json", "x-streamfix-recording": name},
                   timeout=TIMEOUT, trust_env=False)  # fmt: skip
    assert r.status_code == 200, r.text
    return r.content


def _model(name: str) -> str:
    rec = load(name)
    if rec.api == "gemini":  # the model is in the path: /v1beta/models/<model>:streamGenerateContent
        return rec.request["path"].split("/models/", 1)[1].split(":", 1)[0]
    return orjson.loads(rec.request_body)["model"]


def stop(p: Proc) -> str:
    p.signal(signal.SIGTERM)
    assert p.wait(60) == 0, p.tail()
    return p.output


@pytest.fixture
def phoenix(tmp_path):
    ph = receiver.Phoenix(tmp_path / "phoenix")
    try:
        yield ph
    finally:
        ph.stop()


def test_the_launcher_with_two_variables_sends_a_span_per_turn(tmp_path, phoenix, request):
    p, port = launcher(tmp_path, _env(OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.otlp, OTEL_SERVICE_NAME="streamfix-e2e"))
    show_logs_on_failure(request, {"sidecar": p, "phoenix": phoenix.proc})
    for name in TOLD:
        turn(port, name)
    out = stop(p)  # the exit flushes what the batch still holds
    assert f"traces: a span per turn to {phoenix.otlp}/v1/traces as streamfix-e2e" in out
    assert f"traces: {len(TOLD)} spans sent" in out
    spans = phoenix.wait_spans(len(TOLD))
    assert len(spans) == len(TOLD), [s["name"] for s in spans]
    by_name = dict(zip(TOLD, spans, strict=True))  # one turn after the other: in order
    for name, (op, told, said) in TOLD.items():
        s = by_name[name]
        a = s["attributes"]
        model = _model(name)
        assert s["name"] == f"{op} {model}" and s["parent_id"] is None
        assert a["gen_ai.request.model"] == model
        assert a["gen_ai.operation.name"] == op
        assert a["gen_ai.response.finish_reasons"] == told, name
        assert a["streamfix.gateway.finish_reasons"] == said, name
        assert a["gen_ai.usage.output_tokens"] > 0 and a["gen_ai.usage.input_tokens"] > 0
        assert a["server.address"] == "127.0.0.1" and a["http.response.status_code"] == 200
        assert a["gen_ai.response.model"] and a["gen_ai.response.id"]
        streamed = load(name).streaming
        assert a.get("gen_ai.request.stream", False) is streamed, name
        assert ("gen_ai.response.time_to_first_chunk" in a) is streamed
        assert "error.type" not in a and s["status_code"] != "ERROR"
    chat = by_name["chat-devin-truncated-toolcall"]["attributes"]
    assert chat["streamfix.verdict"] == "max_tokens" and "truncation" in chat["streamfix.repaired"]
    assert (
        chat["gen_ai.request.max_tokens"]
        == orjson.loads(load("chat-devin-truncated-toolcall").request_body)["max_tokens"]
    )


def test_a_receiver_that_is_down_changes_nothing_for_clients(tmp_path, request):
    names = ["chat-devin-truncated-toolcall", "messages-devin-truncated", "gemini-devin-truncated"]
    plain, port = launcher(tmp_path, _env())
    show_logs_on_failure(request, {"without traces": plain})
    want = [turn(port, n) for n in names]
    stop(plain)
    dead = free_port()  # nothing listens there
    p, port = launcher(tmp_path, _env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{dead}"))
    show_logs_on_failure(request, {"dead receiver": p})
    got = [turn(port, n) for n in names]
    p.wait_for(r"traces: the receiver at \S+ did not take", 60)  # the batch's first try (the SDK retries for 10 s)
    got += [turn(port, names[0])]  # and the sidecar goes on serving as before
    want += want[:1]
    out = stop(p)
    assert got == want
    lines = [line for line in out.splitlines() if "traces:" in line and "did not take" in line]
    assert len(lines) == 1, out
    assert "clients are not affected" in lines[0]
    assert "Traceback" not in out and "Exception" not in out


@pytest.fixture
def traced_chain(tmp_path, phoenix):
    c = Chain(tmp_path / "chain")
    c.dir.mkdir()
    c.turns = c.dir / "turns.jsonl"
    c.extra = ["--set", f"streamfix_log={c.turns}", "--set", f"streamfix_traces={phoenix.otlp}/v1/traces"]
    try:
        yield c.up(), phoenix
    finally:
        c.down()


def test_the_providers_call_is_the_turns_child(traced_chain, request):
    chain, phoenix = traced_chain
    show_logs_on_failure(request, {**chain.procs, "phoenix": phoenix.proc})
    jobs = [("chat", "max_tokens"), ("responses", "tool"), ("messages", "stop")]
    for i, (api, scenario) in enumerate(jobs):
        body = request_body(api, f"Please do it. [scenario:{scenario}] [conv:tr{i}-{api}]")
        r = httpx.post(chain.base + PATHS[api], json=body, timeout=TIMEOUT, trust_env=False)
        assert r.status_code == 200, r.text
    chain.mitm.wait_count(r"streamfix: upstream GetChatMessage", len(jobs), TIMEOUT)
    chain.mitm.stop()  # flushes the turn log and the spans
    assert "Traceback" not in chain.mitm.output, chain.mitm.tail()  # idle connections end quietly
    records = {t["flow"]: t for t in map(orjson.loads, chain.turns.read_bytes().splitlines())}
    assert len(records) == len(jobs)
    spans = phoenix.wait_spans(2 * len(jobs))
    parents = {s["attributes"]["streamfix.flow"]: s for s in spans if s["parent_id"] is None}
    children = {s["parent_id"]: s for s in spans if s["parent_id"] is not None}
    assert set(parents) == set(records)
    for flow, rec in records.items():
        s = parents[flow]
        a = s["attributes"]
        assert a["gen_ai.response.finish_reasons"] == rec["finish"]["client"]
        assert a["streamfix.ended"] == rec["ended"] and a["gen_ai.request.model"] == rec["model"]
        assert a["gen_ai.usage.output_tokens"] == rec["tokens"]["client"]["output_tokens"]
        child = children[s["context"]["span_id"]]
        c = child["attributes"]
        assert c["gen_ai.provider.name"] == "devin" and c["gen_ai.response.model"] == "swe-fake"
        assert c["streamfix.flow"] == rec["upstream_call"]["flow"]
        assert c["gen_ai.usage.output_tokens"] == rec["tokens"]["upstream"]["output_tokens"]
        assert c["gen_ai.response.finish_reasons"] == [rec["upstream_call"]["finish"]]
        assert s["start_time"] <= child["start_time"] and child["end_time"] <= s["end_time"]
    by_api = {records[f]["api"]: parents[f]["attributes"] for f in records}
    assert by_api["chat"]["gen_ai.response.finish_reasons"] == ["length"]  # Devin's MAX_TOKENS, told
    assert by_api["chat"]["streamfix.verdict"] == "max_tokens"
    assert all(s["status_code"] != "ERROR" for s in spans)
