"""The benchmark's baseline addon: stream every SSE response through unchanged.

    mitmdump -s streamfix/bench_addon.py ...

``flow.response.stream = True`` is the cheapest way mitmproxy can forward a stream as it
arrives; ``python -m streamfix.bench`` compares the repair addon's CPU against it.
"""

from mitmproxy import http


class Passthrough:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None and flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = True


addons = [Passthrough()]
