"""python -m streamfix.check: saved SSE bodies, .flow files and HAR exports; exit codes."""

import base64
import json
import subprocess
import sys

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


def test_help_and_rules_from_the_command_line():
    h = subprocess.run([sys.executable, "-m", "streamfix.check", "--help"], capture_output=True, text=True, check=True)
    assert "FILE" in h.stdout and "Exit status" in h.stdout and ".har" in h.stdout
    r = subprocess.run([sys.executable, "-m", "streamfix.check", "--rules"], capture_output=True, text=True, check=True)
    assert "item.order" in r.stdout and "chat.tool_index" in r.stdout
