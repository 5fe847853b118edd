"""The real AI SDK (``@ai-sdk/openai`` 2.x, 3.0.88, 4.0.118) accepts every repaired Responses recording
(needs node and scripts/install-clients)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
from streamfix.wire.invariants import json_events
from support import ROOT

from streamfix.recordings import all_recordings

RECORDINGS = [r for r in all_recordings() if r.api == "responses"]


STREAMED = [r for r in RECORDINGS if r.streaming]


parse = json_events


AISDK_SCRIPT = r"""
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
const [dir, file] = process.argv.slice(2);
const req = createRequire(dir + '/package.json');
const { createOpenAI } = await import(pathToFileURL(req.resolve('@ai-sdk/openai')).href);
const body = readFileSync(file);
const fetch = async () => new Response(body, { headers: { 'content-type': 'text/event-stream' } });
const model = createOpenAI({ apiKey: 'x', fetch }).responses('m');
let stream;
try {
  ({ stream } = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [], providerOptions: { openai: { store: false } } }));
} catch (e) {  // a failure before any output (responses-empty-stream) is thrown by doStream
  console.log(JSON.stringify({ errors: [String(e?.message ?? e)], calls: [], reasoning: [], finish: 'thrown' }));
  process.exit(0);
}
const parts = [];
for await (const p of stream) parts.push(p);
const pick = t => parts.filter(p => p.type === t);
console.log(JSON.stringify({
  errors: pick('error').map(p => String(p.error?.message ?? p.error)),
  calls: pick('tool-call').map(p => ({ name: p.toolName, input: p.input })),
  reasoning: pick('reasoning-start').map(p => p.id),
  finish: pick('finish').map(p => p.finishReason?.unified ?? p.finishReason)[0],
}));
"""


@pytest.mark.clients
@pytest.mark.parametrize("sdk", ["aisdk5", "aisdk6", "aisdk7"])  # @ai-sdk/openai 2.x, 3.0.88, 4.0.118
@pytest.mark.parametrize("rec", STREAMED, ids=lambda r: r.name)
def test_aisdk_accepts_expected(rec, sdk, tmp_path):
    sdk_dir = ROOT / ".cache" / "clients" / sdk
    if not shutil.which("node") or not (sdk_dir / "node_modules" / "@ai-sdk" / "openai").exists():
        pytest.skip("node or the pinned AI SDK (scripts/install-clients) is missing")
    script = tmp_path / "probe.mjs"
    script.write_text(AISDK_SCRIPT)

    def probe(body: bytes) -> dict[str, Any]:
        f = tmp_path / "body.sse"
        f.write_bytes(body)
        res = subprocess.run(
            ["node", str(script), str(sdk_dir), str(f)], capture_output=True, timeout=60, env=dict(os.environ)
        )
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        return json.loads(res.stdout.decode().strip().splitlines()[-1])

    got = probe(rec.expected)
    terminal = parse(rec.expected)[-1]["type"]
    if terminal == "response.failed":  # a failure stays one: never a success finish
        assert got["finish"] not in ("stop", "tool-calls", "length") and got["calls"] == []
        return
    assert got["errors"] == []
    want_calls = [
        e["item"]["name"]
        for e in parse(rec.expected)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert [c["name"] for c in got["calls"]] == want_calls
    assert got["finish"] == ("length" if terminal == "response.incomplete" else "tool-calls" if want_calls else "stop")
    if rec.kind == "buggy" and rec.name.startswith("responses-devin-"):
        before = probe(rec.body)  # unrepaired: 4.x rejects chunks, 2.x/3.x silently lose the calls
        assert before["errors"] if sdk == "aisdk7" else before["calls"] == []
