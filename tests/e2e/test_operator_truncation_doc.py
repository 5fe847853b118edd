"""docs/truncation.md says what the code does: its receipt example is the line a
real mitmdump logs for the recording it names, its table's terminals are what each API's
truncated recording ends with, and a stream without a terminal ends the way it says
(each API with its own failure: Responses response.failed, chat an error chunk, messages an
error event, Gemini an error object), never as a success. Each claim is read from the document itself, so a change to either side
that makes them disagree fails here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import pytest
from repairkit import run
from streamfix.wire.apis import _REGISTRY
from support import ROOT, run_mitmdump

from streamfix.recordings import load

DOC = (ROOT / "docs" / "truncation.md").read_text()
TRUNCATED = {
    "/v1/chat/completions": "chat-devin-truncated-toolcall",
    "/v1/responses": "responses-devin-truncated",
    "/v1/messages": "messages-devin-truncated",
    "Gemini": "gemini-devin-truncated",
}


def section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.e2e
def test_the_receipt_example_is_what_mitmdump_logs(tmp_path: Path) -> None:
    text = section("Receipts")
    (example,) = [line.strip() for line in text.splitlines() if line.startswith("    streamfix: ")]
    name = re.search(r"For the recording\s+`([\w-]+)`", text).group(1)
    flow = tmp_path / f"{name}.flow"
    subprocess.run([*run_recordings_cmd(), "to-flow", name, str(flow)], check=True, timeout=60, cwd=ROOT)
    r = run_mitmdump(tmp_path / "conf", "-nr", str(flow))
    assert r.returncode == 0, r.stderr
    logged = [re.sub(r"^\[[\d:.]+\] ", "", line) for line in r.stdout.splitlines() if "streamfix: POST" in line]
    assert logged == [example], logged


def run_recordings_cmd() -> list[str]:
    import sys

    return [sys.executable, "-m", "streamfix.recordings"]


def expected_fragments(cell: str) -> list[str]:
    """A table cell's backticked facts as they appear in compact JSON: ``key: value`` ->
    ``"key":value`` (a dotted key: its last name), a bare event name as it is."""
    out = []
    for frag in re.findall(r"`([^`]+)`", cell):
        key, sep, value = frag.partition(": ")
        if sep:
            out.append(f'"{key.rsplit(".", 1)[-1]}":{orjson.dumps(orjson.loads(value)).decode()}')
        else:
            out.append(frag)
    return out


def test_the_table_terminals_are_what_the_truncated_recordings_end_with() -> None:
    rows = [line for line in DOC.splitlines() if line.startswith("| ") and "after `content_filter`" not in line]
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        api = cells[0].strip("`")
        if api not in TRUNCATED:
            continue
        seen.add(api)
        rec = load(TRUNCATED[api])
        out, _ = run(_REGISTRY[rec.api][0], rec.body, rec.request["body"])
        datas = [orjson.loads(x[5:]) for x in out.splitlines() if x.startswith(b"data:") and x[5:].strip()[:1] == b"{"]
        compact = "".join(orjson.dumps(d).decode() for d in datas)
        for want in expected_fragments(cells[1]):
            assert want in compact, (api, want)
        if api == "/v1/responses":  # "function_call items keep status: completed"
            calls = [d["item"] for d in datas if d.get("type") == "response.output_item.done"
                     and d["item"].get("type") == "function_call"]  # fmt: skip
            assert calls and all(c["status"] == "completed" for c in calls)
    assert seen == set(TRUNCATED), seen


def cut_before_terminal(api: str, body: bytes) -> bytes:
    """The recording's body up to (not including) its terminal event."""
    events = body.split(b"\n\n")
    terminal = {
        "chat": lambda e: b'"finish_reason":"' in e.replace(b" ", b"") or e.strip() == b"data: [DONE]",
        "responses": lambda e: b"response.completed" in e or b"response.incomplete" in e,
        "messages": lambda e: b"message_delta" in e or b"message_stop" in e,
        "gemini": lambda e: b"finishReason" in e,
    }[api]
    keep = []
    for e in events:
        if terminal(e):
            break
        keep.append(e)
    return b"\n\n".join(keep) + b"\n\n"


@pytest.mark.parametrize("name", ["chat-devin-index1", "responses-devin-toolcall", "messages-devin-truncated",
                                  "gemini-devin-truncated"])  # fmt: skip
def test_a_stream_without_its_terminal_ends_as_the_doc_says(name: str) -> None:
    text = section("Never the other way")
    rec = load(name)
    body = cut_before_terminal(rec.api, rec.body)
    out, rep = run(_REGISTRY[rec.api][0], body, rec.request["body"])
    tail = out.rstrip().rsplit(b"\n\n", 1)[-1]
    if rec.api == "responses":
        assert "it is ended with `response.failed`" in text
        assert b"event: response.failed" in tail and b'"status":"failed"' in tail, tail
    elif rec.api == "chat":
        assert "it is ended with an error chunk" in text
        assert tail.startswith(b"data: {") and b'"error"' in tail, tail
    elif rec.api == "messages":
        assert "`/v1/messages`: it is ended with an `error` event" in text
        assert tail.startswith(b"event: error\n") and b'"type":"error"' in tail, tail
        assert b"message_stop" not in out and b"message_delta" not in out
        assert "stream ended without message_stop: ended it with an error event" in text
        assert any("ended it with an error event" in n for n in rep.notes), rep.notes
    else:
        assert "Gemini: it is ended with an error object" in text
        assert tail.startswith(b"data: {") and b'"error"' in tail and b'"status":"INTERNAL"' in tail, tail
        assert b'"finishReason"' not in out  # (the error's message names it)
        assert any("ended it with an error object" in n for n in rep.notes), rep.notes
    assert b"response.completed" not in out and b'"finish_reason":"stop"' not in out.replace(b" ", b"")
