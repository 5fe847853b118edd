"""streamfix's protocol core: sans-IO stream repair for LLM gateway responses.

Nothing in this package imports mitmproxy, asyncio or sockets (ruff's banned-api in
pyproject.toml and tests/wire/test_sans_io.py hold it to that): repairers are fed bytes
(or parsed SSE events) and return bytes; ``addons/`` wires them into mitmproxy.

The public surface is :data:`__all__`, importable from here (``from streamfix.wire import
StreamRepair``): the rules and the request's facts, a repairer per API and the driver that
feeds it, the SSE parser, the stream contract and what a client was told. Each name is
imported when first used, so ``import streamfix.wire.sse`` alone loads no repairer. The
modules' other names (the upstream leg's ``devin`` and ``correlate`` among them) are
theirs: importable, not promised.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from . import _core

_core.select(__path__)  # the compiled core when it is built from these very sources (wire/_core.py)

_PUBLIC = {
    # what to repair, and the facts a repair needs from the request
    "Rules": "rules",
    "FlowContext": "rules",
    "Verdict": "verdict",
    # a repairer for an API, and the fail-open driver that feeds it
    "api_for_path": "apis",
    "stream_repairer": "apis",
    "json_repairer": "apis",
    "StreamRepair": "stream",
    "Reads": "stream",
    "repair_body": "stream",
    "EventRepairer": "stream",
    # SSE framing
    "SseParser": "sse",
    "Event": "sse",
    # what a correct stream is
    "StreamChecker": "contract",
    "Violation": "contract",
    "check": "contract",
    # the usage a client was told
    "Told": "told",
}
"""Public name -> the module that defines it."""

__all__ = [
    "Event",
    "EventRepairer",
    "FlowContext",
    "Reads",
    "Rules",
    "SseParser",
    "StreamChecker",
    "StreamRepair",
    "Told",
    "Verdict",
    "Violation",
    "api_for_path",
    "check",
    "json_repairer",
    "repair_body",
    "stream_repairer",
]

if TYPE_CHECKING:
    from .apis import api_for_path, json_repairer, stream_repairer
    from .contract import StreamChecker, Violation, check
    from .rules import FlowContext, Rules
    from .sse import Event, SseParser
    from .stream import EventRepairer, Reads, StreamRepair, repair_body
    from .told import Told
    from .verdict import Verdict


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
