"""Every repair rule is declared once (wire/rules.py) and holds to its declaration.

For each rule: an option ``streamfix_<rule>`` with the declared help that switches exactly
that rule; each declared recording repaired with the rule on is its hand-checked expected
body and free of the declared contract rules, and with the rule off is not its expected
body and breaks one of them (the defect stays: the rule is what removes it); and the fast
path keeps off what the rule changes: skimming on and off give the same repair, with the
rule on and off, whole and in many chunkings. The declaration's ``fast`` says how (or why
nothing needs guarding). A rule added without a declaration, an option, a recording or a
guard fails here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import fields, replace
from pathlib import Path

import orjson
import pytest
from mitmproxy.test import taddons
from repairkit import cut, skim_same
from streamfix.addons import options
from streamfix.addons import repair as repair_addon
from streamfix.wire.apis import json_repairer, stream_repairer
from streamfix.wire.contract import RULES as CONTRACT
from streamfix.wire.contract import check
from streamfix.wire.rules import APPLIED, GUARDED, NO_DELTA, FlowContext, Rules, declared
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import Recording, load

ROOT = Path(__file__).resolve().parents[2]
RULES = declared()
CASES = [(name, rec) for name, r in RULES.items() for rec in r.recordings]
STREAMED = [(name, rec) for name, rec in CASES if load(rec).streaming]


def repair(rec: Recording, rules: Rules, pieces: list[bytes] | None = None) -> tuple[bytes, dict[str, int]]:
    """The recording repaired as the addon does it (stream or JSON body): bytes, rules fired."""
    req = rec.request.get("body")
    ctx = FlowContext(model=(req or {}).get("model"), request=req)
    if "started_at" in rec.meta:
        ctx.started_at = rec.meta["started_at"]
    v = Verdict()
    v.request(req)
    if not rec.streaming:
        obj = orjson.loads(rec.body)
        fired: Counter[str] = Counter()
        changed = json_repairer(rec.api)(obj, rules, ctx, v, fired=fired)
        return (orjson.dumps(obj) if changed else rec.body), dict(fired)
    s = StreamRepair(stream_repairer(rec.api, rules, ctx, v))
    out = b"".join([s.feed(p) for p in (pieces or [rec.body])] + [s.close()])
    assert s.error is None
    return out, dict(s.repairer.fired)


def test_every_switch_is_declared() -> None:
    switches = [f.name for f in fields(Rules) if f.type in ("bool", bool)]
    assert switches == list(RULES), "declare each bool field of Rules with rule() (wire/rules.py)"
    for name, r in RULES.items():
        assert r.name == name and r.option == f"streamfix_{name}"
        assert r.help.startswith(("Responses", "Chat", "Messages", "Gemini", "Every API")), name
        if not r.recordings:  # only a defect no client recording can show, and tests that hold it instead
            assert len(r.unrecorded) > 40, f"{name}: no recording shows the defect it repairs (say why: unrecorded)"
            named = re.findall(r"tests/[\w/]+\.py", r.unrecorded)
            assert named, f"{name}: name the tests that hold the rule on and off"
            for path in named:
                assert f"{name}=False" in (ROOT / path).read_text(), f"{name}: {path} never turns it off"
        else:
            assert not r.unrecorded, name
        assert all(load(n).kind == "buggy" for n in r.recordings), name
        assert set(r.contract) <= set(CONTRACT), f"{name}: {set(r.contract) - set(CONTRACT)} are no contract rules"
        head = next((h for h in (NO_DELTA, GUARDED, APPLIED) if r.fast.startswith(h)), None)
        assert head is not None and len(r.fast) > len(head) + 10, f"{name}: say how the fast path keeps off it"
        assert getattr(Rules(), name) is True  # every repair is on by default


def test_each_rule_is_an_option_with_its_help_that_switches_it_alone() -> None:
    assert options.RULE_OPTIONS == {r.option: name for name, r in RULES.items()}
    addon = repair_addon.Repair()
    with taddons.context(addon) as tctx:
        for name, r in RULES.items():
            o = tctx.options._options[r.option]
            assert o.typespec is bool and o.default is True
            assert " ".join(o.help.split()) == " ".join(r.help.split())
            tctx.configure(addon, **{r.option: False})
            assert getattr(addon.rules, name) is False
            assert all(getattr(addon.rules, other) for other in RULES if other != name), name
            tctx.configure(addon, **{r.option: True})
            assert addon.rules == Rules()


@pytest.mark.parametrize(("name", "recording"), CASES, ids=[f"{n}:{r}" for n, r in CASES])
def test_the_rule_on_repairs_its_recording_and_off_leaves_the_defect(name: str, recording: str) -> None:
    rec = load(recording)
    on, fired_on = repair(rec, Rules())
    off, fired_off = repair(rec, replace(Rules(), **{name: False}))
    assert on == rec.expected
    assert name in fired_on
    assert off != rec.expected, f"with {name} off, {recording} should keep its defect"
    assert name not in fired_off
    want = set(RULES[name].contract)
    if rec.streaming and want:
        assert not want & {v.rule for v in check(rec.api, on)}
        assert want & {v.rule for v in check(rec.api, off)}, f"with {name} off the contract should report it"


@pytest.mark.parametrize(("name", "recording"), STREAMED, ids=[f"{n}:{r}" for n, r in STREAMED])
def test_the_fast_path_keeps_off_what_the_rule_changes(name: str, recording: str) -> None:
    rec = load(recording)
    req = rec.request.get("body")
    for rules in (Rules(), replace(Rules(), **{name: False})):
        skim_same(rec.api, [rec.body], req, rules)
        events = [i + 2 for i in range(len(rec.body) - 1) if rec.body[i : i + 2] == b"\n\n"]
        skim_same(rec.api, cut(rec.body, events), req, rules)  # a read per event
        skim_same(rec.api, cut(rec.body, list(range(0, len(rec.body), 97))), req, rules)
