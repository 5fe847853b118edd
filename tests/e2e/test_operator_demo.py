"""``streamfix demo`` shows what changed event by event, as mitmweb's "streamfix
diff" view does, not a character diff across event names: for the Claude path's recording
(the message item closed before the call, which is renumbered, and the late closes
dropped) and a chat index repair. Expected lines read by hand from the recordings'
descriptions and bodies (responses-claude-text-then-tool: the message closed at sequence
numbers 7-9 before the call is added, the call renumbered 10-14; chat-devin-index1: the
only tool call sent as index 1 in its three tool-call chunks).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT, child_env

pytestmark = pytest.mark.e2e


def test_demo_diff_is_per_event() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "streamfix.cli", "demo", "responses-claude-text-then-tool", "chat-devin-index1"],
        capture_output=True, text=True, timeout=300, env=child_env(), cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = [line.strip() for line in r.stdout.splitlines()]
    claude = out[out.index(next(x for x in out if x.startswith("=== responses-claude-text-then-tool"))) :]
    for want in (
        "streamfix: 7 of 15 events changed, 3 inserted, 3 dropped (15 sent)",
        '~ #0 response.created: + response.model = "claude-sonnet-4-6"',
        "~ #9 response.output_item.added: ~ sequence_number: 7 -> 10",
        "~ #13 response.output_item.done: ~ sequence_number: 11 -> 14",
    ):
        assert want in claude, (want, r.stdout)
    for prefix in ("+ #6 response.output_text.done", "+ #7 response.content_part.done", "+ #8 response.output_item.done",
                   "- dropped original #11 response.output_text.done", "- dropped original #13 response.output_item.done"):  # fmt: skip
        assert any(x.startswith(prefix) for x in claude), (prefix, r.stdout)
    for n in (3, 4, 5):
        assert f"~ #{n} chat.completion.chunk: ~ choices[0].delta.tool_calls[0].index: 1 -> 0" in out, r.stdout
    assert not any("[-" in x or "{+" in x for x in out), "no character diff"
