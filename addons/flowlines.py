"""streamfix: mitmdump's flow line for a streamed response says what happened.

mitmdump's dumper prints a response's size from its body, and a streamed body is not
kept: every stream the sidecar passes reads ``<< 200 OK (content missing)``, which looks
like a failure. For a flow the client leg streamed, this addon has the dumper print
``streamed 4.1k`` (the bytes the client got; and what the gateway sent, when the repair
changed the size) and the flow's receipt (its comment's first line: verdict and rules
fired), or ``passed as it came``. It changes nothing but that text: the flow's body, its
comment and every other line are the dumper's own.

The dumper has no hook for it, so :meth:`FlowLines.running` wraps its response line
(``Dumper._echo_response_line``) once; a mitmproxy without it (or mitmweb, which has no
dumper) is left as it is.
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.utils import human

logger = logging.getLogger("streamfix")

STREAMED = "streamfix.streamed"
"""Flow metadata the client leg sets on a streamed flow: ``(bytes from the gateway,
bytes to the client)``."""
MISSING = "(content missing)"
"""What the dumper prints for a body mitmproxy did not keep."""


def said(flow: http.HTTPFlow) -> str | None:
    """What the flow line says of a streamed flow in place of :data:`MISSING` (None:
    not a flow the client leg streamed)."""
    sizes: Any = flow.metadata.get(STREAMED)
    if not isinstance(sizes, tuple) or len(sizes) != 2:
        return None
    got, sent = sizes
    text = f"streamed {human.pretty_size(sent)}"
    if got != sent:
        text += f" (the gateway's {human.pretty_size(got)})"
    first = (flow.comment or "").split("\n", 1)[0]
    return f"{text}, {first}" if first else f"{text}, passed as it came"


class FlowLines:
    """Wraps the dumper's response line; see the module docstring."""

    def __init__(self) -> None:
        self.wrapped: Any = None

    def running(self) -> None:
        master = getattr(ctx, "master", None)
        dumper = master.addons.get("dumper") if master is not None else None
        line = getattr(dumper, "_echo_response_line", None)
        if dumper is None or line is None or self.wrapped is dumper:
            return
        self.wrapped = dumper

        def response_line(flow: http.HTTPFlow) -> None:
            text = said(flow) if flow.response is not None and flow.response.raw_content is None else None
            if text is None:
                return line(flow)
            echo = dumper.echo
            dumper.echo = lambda s, **style: echo(s.replace(MISSING, text), **style)
            try:
                return line(flow)
            finally:
                dumper.echo = echo

        dumper._echo_response_line = response_line
