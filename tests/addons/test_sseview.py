"""addons/sseview.py: the SSE content views."""

from mitmproxy import contentviews
from mitmproxy.test import taddons, tflow
from streamfix.addons import sseview

BODY = b'event: a\ndata: {"x": 1}\n\n: keep-alive\n\ndata: [DONE]\n\n'


def sse_flow(body: bytes, original: bytes | None = None, ctype: str = "text/event-stream"):
    f = tflow.tflow(resp=True)
    f.response.headers["content-type"] = ctype
    f.response.content = body
    if original is not None:
        f.metadata[sseview.ORIGINAL] = original
    return f, contentviews.make_metadata(f.response, f)


def test_sse_events_view():
    with taddons.context():
        _, md = sse_flow(BODY)
        view = sseview.SseEvents()
        assert view.render_priority(BODY, md) > 1
        assert view.prettify(BODY, md) == '# 0\na: {"x":1}\n# 1\n: keep-alive\n# 2\n[DONE]\n'


def test_sse_events_indented_view():
    with taddons.context():
        body = b'data: {"type":"t","a":{"b":1}}\n\ndata: [DONE]\n\n'
        _, md = sse_flow(body)
        text = sseview.SseEventsIndented().prettify(body, md)
        assert text == '# 0 t\n{\n  "type": "t",\n  "a": {\n    "b": 1\n  }\n}\n# 1\n[DONE]\n'


def test_diff_view_shows_the_changed_field():
    with taddons.context():
        f, md = sse_flow(b'data: {"x":2}\n\n', b'data: {"x":1}\n\n')
        view = sseview.StreamfixDiff()
        assert view.render_priority(f.response.content, md) > 2
        text = view.prettify(f.response.content, md)
        assert "~ #0 data: ~ x: 1 -> 2" in text.splitlines()


def ev(obj: str, name: str | None = None) -> bytes:
    return (f"event: {name}\n" if name else "").encode() + b"data: " + obj.encode() + b"\n\n"


LONG = "x" * 900  # a long field the change must not hide behind


def test_stream_diff_names_renamed_terminal_and_new_field_within_width():
    orig = ev('{"type":"response.created","response":{"id":"r"}}', "response.created")
    for i in range(20):
        orig += ev(
            f'{{"type":"response.output_text.delta","delta":"{LONG}","sequence_number":{i}}}',
            "response.output_text.delta",
        )
    done = (
        f'{{"type":"response.completed","response":{{"id":"r","status":"completed","output":[{{"text":"{LONG}"}}]}}}}'
    )
    orig += ev(done, "response.completed")
    rep = orig.replace(
        ev(done, "response.completed"),
        ev(
            f'{{"type":"response.incomplete","response":{{"id":"r","status":"incomplete","output":[{{"text":"{LONG}"}}],'
            '"incomplete_details":{"reason":"max_output_tokens"}}}',
            "response.incomplete",
        ),
    )
    text = sseview.stream_diff(orig, rep)
    lines = text.splitlines()
    assert all(len(line) <= sseview.WIDTH for line in lines), max(lines, key=len)
    assert lines[0] == "streamfix: 1 of 22 events changed, 0 inserted, 0 dropped (22 sent)"
    assert "~ #21 response.completed -> response.incomplete" in lines
    assert '    + response.incomplete_details = {"reason":"max_output_tokens"}' in lines
    assert '    ~ response.status: "completed" -> "incomplete"' in lines
    assert "  ... 20 unchanged events" in lines  # 21 before, one shown as context
    assert "  #20 response.output_text.delta" in lines
    assert LONG not in text


def test_stream_diff_inserted_and_dropped_events():
    a = ev('{"type":"s"}') + ev('{"type":"x.done","output_index":0}') + ev('{"type":"t"}')
    b = ev('{"type":"s"}') + ev('{"type":"y.added","output_index":1}') + ev('{"type":"t"}')
    lines = sseview.stream_diff(a, b).splitlines()
    assert lines[0] == "streamfix: 0 of 3 events changed, 1 inserted, 1 dropped (3 sent)"
    assert "- dropped original #1 x.done (output_index=0)" in lines
    assert "+ #1 y.added (output_index=1) (inserted)" in lines


def test_stream_diff_of_equal_bodies():
    assert sseview.stream_diff(BODY, BODY) == "(no change: 3 events passed through as they came)\n"


def test_diff_view_says_the_verdict_and_why_above_the_diff():
    """The flow's comment (receipt, why, notes, an early end) heads the diff: the view says
    why beside what changed (the flow list cuts the comment to its first words)."""
    with taddons.context():
        f, md = sse_flow(b'data: {"x":2}\n\n', b'data: {"x":1}\n\n')
        f.comment = (
            "verdict max_tokens; fixed truncation 1 (1 event, chat)\nwhy: usage: output tokens 9 >= max_tokens 9"
        )
        lines = sseview.StreamfixDiff().prettify(f.response.content, md).splitlines()
        assert lines[:3] == [
            "verdict max_tokens; fixed truncation 1 (1 event, chat)",
            "why: usage: output tokens 9 >= max_tokens 9",
            "",
        ]
        assert lines[3].startswith("streamfix: 1 of 1 events changed") and "~ #0 data: ~ x: 1 -> 2" in lines


def test_diff_view_on_a_json_body():
    with taddons.context():
        f, md = sse_flow(b'{"a":1,"status":"completed"}', b'{"a":1}', "application/json")
        text = sseview.StreamfixDiff().prettify(f.response.content, md)
        assert '+  "status": "completed"' in text


def test_auto_view_is_the_diff_only_when_something_changed():
    with taddons.context():
        _, md = sse_flow(BODY, BODY)
        assert contentviews.registry.get_view(BODY, md).name == "SSE events"
        changed = BODY.replace(b'"x": 1', b'"x": 2')
        _, md = sse_flow(changed, BODY)
        assert contentviews.registry.get_view(changed, md).name == "streamfix diff"


def test_diff_without_original_is_a_one_line_hint():
    with taddons.context():
        _, md = sse_flow(BODY)
        view = sseview.StreamfixDiff()
        assert view.render_priority(BODY, md) < 0
        text = view.prettify(BODY, md)
        assert text.startswith("streamfix diff: no original body was kept") and "streamfix_keep_bodies=true" in text
