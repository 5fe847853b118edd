"""Every recording, through the same registry the addon uses (wire.apis).

Checks that hold for all of them, whatever the API: the format is complete and carries
no secret; the hand-checked expected body is what the repair gives; repairing it again
changes nothing; it passes the independent invariant oracle (wire/invariants.py) while
the raw buggy body does not, or differs from it; clean ones pass byte for byte.
"""

import orjson
import pytest
from streamfix.wire.apis import api_for_path, json_repairer, stream_repairer
from streamfix.wire.invariants import check
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import Recording, all_recordings

RECORDINGS = all_recordings()
SECRET_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "cookie", "set-cookie", "proxy-authorization"}


def repair(rec: Recording, body: bytes) -> bytes:
    req = rec.request.get("body")
    ctx = FlowContext(model=(req or {}).get("model"), request=req)
    if "started_at" in rec.meta:
        ctx.started_at = rec.meta["started_at"]
    v = Verdict()
    v.request(req)
    if rec.streaming:
        s = StreamRepair(stream_repairer(rec.api, Rules(), ctx, v))
        out = s.feed(body) + s.close()
        assert s.error is None, s.error
        return out
    obj = orjson.loads(body)
    return orjson.dumps(obj) if json_repairer(rec.api)(obj, Rules(), ctx, v) else body


def test_there_are_recordings_for_every_api():
    apis = {(r.api, r.kind) for r in RECORDINGS}
    for api in ("responses", "chat", "messages", "gemini"):
        assert (api, "buggy") in apis and (api, "clean") in apis, api


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.name)
def test_format(rec):
    assert rec.kind in ("buggy", "clean")
    assert rec.meta.get("description") and rec.meta.get("source")
    assert api_for_path(rec.request["path"]) == rec.api
    assert isinstance(rec.request.get("body"), dict)
    headers = {k.lower() for k in rec.request.get("headers", {})} | {k.lower() for k in rec.headers}
    assert not headers & SECRET_HEADERS, "recordings never carry secrets"
    assert (rec.path / "expected.body").exists() == (rec.kind == "buggy")


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.name)
def test_repair_gives_the_expected_body(rec):
    assert repair(rec, rec.body) == rec.expected


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.name)
def test_repair_is_idempotent(rec):
    assert repair(rec, rec.expected) == rec.expected


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if r.streaming], ids=lambda r: r.name)
def test_expected_passes_the_invariants(rec):
    assert check(rec.api, rec.expected) == []


@pytest.mark.parametrize("rec", [r for r in RECORDINGS if r.kind == "buggy"], ids=lambda r: r.name)
def test_buggy_ones_are_really_buggy(rec):
    assert rec.body != rec.expected
