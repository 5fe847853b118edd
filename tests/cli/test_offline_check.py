"""python -m streamfix.check: saved SSE bodies, .flow files and HAR exports; exit codes."""

import base64
import json

from streamfix import check
from streamfix.recordings import load, to_flow


def run(*args):
    return check.main([str(a) for a in args])


def test_sse_body_with_violations_exits_1(tmp_path, capsys):
    p = tmp_path / "body.sse"
    p.write_bytes(load("responses-devin-toolcall").body)
    assert run(p) == 1
    out = capsys.readouterr().out
    assert f"{p} [responses]: 6 violations" in out
    assert "  event 0: response.fields: response.created without response.created_at" in out


def test_clean_body_exits_0_and_api_is_guessed(tmp_path, capsys):
    for name in ("responses-openai-clean", "chat-openai-clean", "messages-clean", "gemini-clean"):
        p = tmp_path / name
        p.write_bytes(load(name).body)
        assert run(p) == 0, name
        assert f"[{load(name).api}]: ok" in capsys.readouterr().out


def test_flow_file_is_checked_by_its_path(tmp_path, capsys):
    p = tmp_path / "x.flow"
    to_flow(load("chat-devin-index1"), p)
    assert run(p) == 1
    out = capsys.readouterr().out
    assert "#0 POST /v1/chat/completions [chat]: 1 violation" in out
    assert "event 3: chat.tool_index: choice 0: tool_calls index 1, expected 0" in out


def test_har_export(tmp_path, capsys):
    bad, good = load("responses-claude-text-then-tool"), load("responses-codex-done")

    def entry(rec, b64):
        text = base64.b64encode(rec.body).decode() if b64 else rec.body.decode()
        content = {"mimeType": "text/event-stream", "text": text, **({"encoding": "base64"} if b64 else {})}
        return {
            "request": {"method": "POST", "url": "http://127.0.0.1:8317/v1/responses"},
            "response": {"status": 200, "content": content},
        }

    other = {
        "request": {"method": "GET", "url": "http://x/v1/models"},
        "response": {"content": {"mimeType": "application/json", "text": "{}"}},
    }
    p = tmp_path / "x.har"
    p.write_text(json.dumps({"log": {"entries": [entry(bad, False), other, entry(good, True)]}}))
    assert run(p) == 1
    out = capsys.readouterr().out
    assert "x.har#0 POST /v1/responses [responses]: 6 violations" in out
    assert "x.har#2 POST /v1/responses [responses]: ok" in out
    assert "#1" not in out


def test_unknown_api_and_unreadable_exit_2(tmp_path, capsys):
    p = tmp_path / "x.txt"
    p.write_bytes(b'data: {"hello": 1}\n\n')
    assert run(p) == 2
    assert "--api" in capsys.readouterr().err
    assert run(p, "--api", "chat") == 1  # no choices: not a chat chunk
    assert run(tmp_path / "missing") == 2


def _flow_file(p, rec, *, body, original=None, marked=False):
    """A client-leg flow of ``rec`` as saved: ``body`` the flow's body (None: streamed and
    not kept, as mitmproxy saves a streamed response), ``original`` streamfix's metadata."""
    from mitmproxy import io

    to_flow(rec, p)
    with p.open("rb") as fp:
        (f,) = list(io.FlowReader(fp).stream())
    f.response.raw_content = body
    if original is not None:
        f.metadata["streamfix.original"] = original
    if marked:
        f.marked = ":wrench:"
    with p.open("wb") as fp:
        io.FlowWriter(fp).add(f)


def test_a_flow_without_a_saved_body_says_so_and_how_to_save_one(tmp_path, capsys):
    """A streamed flow saved without its body (mitmproxy's default) was reported as
    terminal.present (exit 1); it has nothing to check: exit 3, and how to save one."""
    p = tmp_path / "x.flow"
    _flow_file(p, load("responses-devin-toolcall"), body=None)
    assert run(p) == check.NO_BODY == 3
    out = capsys.readouterr().out
    assert "#0 POST /v1/responses [responses]: no body saved (the response was streamed" in out
    assert "mitmdump -s addons/repair.py -w FILE" in out and "streamfix_keep_bodies=true" in out
    assert "violation" not in out and "terminal.present" not in out
    assert run(p, "--original") == 3  # nor is the gateway's
    # violations elsewhere outrank it
    bad = tmp_path / "bad.sse"
    bad.write_bytes(load("responses-devin-toolcall").body)
    assert run(p, bad) == 1


def test_an_empty_saved_body_is_checked_not_missing(tmp_path, capsys):
    """A body that was saved and is empty (the gateway sent no event) is a violation."""
    p = tmp_path / "x.flow"
    rec = load("responses-empty-stream")
    _flow_file(p, rec, body=b"", original=b"")
    assert run(p) == 1
    assert "end of stream: terminal.present: no event at all" in capsys.readouterr().out


def test_both_bodies_of_a_kept_flow(tmp_path, capsys):
    """With bodies kept, a saved flow backs a bug report against the gateway: --original
    checks what the gateway sent, --both checks both, each labelled."""
    rec = load("responses-devin-toolcall")
    p = tmp_path / "x.flow"
    _flow_file(p, rec, body=rec.expected, original=rec.body, marked=True)
    assert run(p) == 0
    assert "#0 POST /v1/responses [responses]: ok" in capsys.readouterr().out
    assert run(p, "--original") == 1
    out = capsys.readouterr().out
    assert "#0 POST /v1/responses [responses] gateway's original: 6 violations" in out
    assert "response.fields" in out
    assert run(p, "--both") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("[responses] gateway's original: 6 violations")
    assert [x for x in out if "as the client got it" in x] == [
        f"{p}#0 POST /v1/responses [responses] as the client got it: ok, {rec.expected.count(b'data:')} events"
    ]


def test_original_of_a_repaired_flow_that_kept_none(tmp_path, capsys):
    rec = load("responses-devin-toolcall")
    p = tmp_path / "x.flow"
    _flow_file(p, rec, body=rec.expected, marked=True)
    assert run(p, "--original") == 3
    assert "gateway's original: no body saved (streamfix repaired it without keeping" in capsys.readouterr().out
    q = tmp_path / "clean.flow"  # never changed by streamfix: its body is the gateway's
    _flow_file(q, load("responses-openai-clean"), body=load("responses-openai-clean").body)
    assert run(q, "--original") == 0


NEW_CLASSES = [
    "responses-empty-stream",
    "chat-empty-stream",
    "messages-empty-stream",
    "gemini-empty-stream",
    "chat-litellm-usage-choices",
    "chat-portkey-anthropic-overloaded",
    "chat-portkey-gemini-text-tool",
    "chat-portkey-gemini-parallel",
]


def test_new_defect_classes_violate_raw_and_not_repaired(tmp_path, capsys):
    """The new defect classes: ``python -m streamfix.check`` reports each raw
    stream and nothing on its repaired one (the hand-checked expected.body)."""
    want = {
        "chat-litellm-usage-choices": "chat.usage_chunk",
        "chat-portkey-anthropic-overloaded": "chat.error_finish",
        "chat-portkey-gemini-text-tool": "chat.tool_finish",
        "chat-portkey-gemini-parallel": "chat.tool_finish",
    }
    for name in NEW_CLASSES:
        rec = load(name)
        raw, fixed = tmp_path / f"{name}.sse", tmp_path / f"{name}.fixed.sse"
        raw.write_bytes(rec.body)
        fixed.write_bytes(rec.expected)
        assert run(raw, "--api", rec.api) == 1, name
        out = capsys.readouterr().out
        assert f": {want.get(name, 'terminal.present')}: " in out, (name, out)
        assert run(fixed, "--api", rec.api) == 0, name
        assert "ok" in capsys.readouterr().out
