"""What a repair costs, measured against what streaming costs anyway (docs/benchmarks.md).

    python -m streamfix.bench                 # `just bench`: (a) to (d) below, about two minutes
    python -m streamfix.bench --quick         # fewer repeats, for a smoke run
    python -m streamfix.bench.instructions    # instructions per event under callgrind (`just bench --instructions`)
    python -m streamfix.bench.capacity        # latency and capacity under many streams (`just bench --capacity`)
    python -m streamfix.bench.metrics         # what the metrics addon costs

Every figure is a ratio against a floor taken in the same run, so it does not depend on how
fast or how loaded the machine is. (a) In process: the repairer against splitting and
parsing the events (:mod:`.inprocess`). (b)-(d) In mitmdump: the repair addon against a
``stream = True`` passthrough (:mod:`.addon`), CPU per event back to back, paced and
batched, and memory (:mod:`.mitm`). The streams are long synthetic turns as an unfixed CPA
emits them (:mod:`.streams`; their builders are re-exported here). Each measurement
returns its results; :mod:`.report` formats them.
"""

from __future__ import annotations

from .streams import (
    CALLS,
    CHAT_REQUEST,
    CLAUDE_RESPONSES_REQUEST,
    MESSAGES_REQUEST,
    MODEL,
    RESPONSES_REQUEST,
    SHORT_STREAMS,
    STREAMS,
    claude_responses_stream,
    devin_chat_stream,
    devin_messages_stream,
    devin_responses_stream,
    events_of,
    long_responses_stream,
    turn_stream,
)

__all__ = [
    "CALLS",
    "CHAT_REQUEST",
    "CLAUDE_RESPONSES_REQUEST",
    "MESSAGES_REQUEST",
    "MODEL",
    "RESPONSES_REQUEST",
    "SHORT_STREAMS",
    "STREAMS",
    "claude_responses_stream",
    "devin_chat_stream",
    "devin_messages_stream",
    "devin_responses_stream",
    "events_of",
    "long_responses_stream",
    "turn_stream",
]
