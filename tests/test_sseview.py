"""addons/sseview.py: the SSE content views."""

from mitmproxy import contentviews
from mitmproxy.test import taddons, tflow

from addons import sseview

BODY = b'event: a\ndata: {"x": 1}\n\n: keep-alive\n\ndata: [DONE]\n\n'


def test_sse_events_view():
    with taddons.context():
        f = tflow.tflow(resp=True)
        f.response.headers["content-type"] = "text/event-stream"
        f.response.content = BODY
        md = contentviews.make_metadata(f.response, f)
        view = sseview.SseEvents()
        assert view.render_priority(BODY, md) > 1
        assert view.prettify(BODY, md) == '# 0\na: {"x":1}\n# 1\n: keep-alive\n# 2\n[DONE]\n'


def test_diff_view_shows_the_change():
    with taddons.context():
        f = tflow.tflow(resp=True)
        f.response.headers["content-type"] = "text/event-stream"
        f.response.content = b'data: {"x":2}\n\n'
        f.metadata[sseview.ORIGINAL] = b'data: {"x":1}\n\n'
        md = contentviews.make_metadata(f.response, f)
        view = sseview.StreamfixDiff()
        assert view.render_priority(f.response.content, md) > 2
        text = view.prettify(f.response.content, md)
        assert '-{"x":1}' in text and '+{"x":2}' in text


def test_diff_view_on_a_json_body():
    with taddons.context():
        f = tflow.tflow(resp=True)
        f.response.headers["content-type"] = "application/json"
        f.response.content = b'{"a":1,"status":"completed"}'
        f.metadata[sseview.ORIGINAL] = b'{"a":1}'
        md = contentviews.make_metadata(f.response, f)
        text = sseview.StreamfixDiff().prettify(f.response.content, md)
        assert '+  "status": "completed"' in text
