"""streamfix: full garbage collections that do not walk the process's startup state.

CPython's cycle collector walks every tracked object of the oldest generation in a full
collection, and nothing moves meanwhile: no read is forwarded, no stream gets its next
event. Once mitmdump runs, about 90,000 such objects exist (modules, mitmproxy's and
streamfix's classes and functions, the options), and they live as long as the process.
Under 100 concurrent streams a full collection then walked about 105,000 objects for
47-82 ms, in mitmdump with ``stream = True`` alone as with the repair (measured with a
``gc.callbacks`` hook: docs/operations.md, "Garbage collection pauses"); every stream in flight
waits that long, which is what a p99 latency sees.

Once mitmproxy runs (``running``), this addon collects once and freezes what is left
(``gc.freeze``: moved to a generation the collector never walks), so a later full
collection walks only what came since: the flows in flight and their state. Frozen
objects are never freed by the collector (reference counting still frees any that no
cycle holds); they are the startup state, which stays anyway. The collection before the
freeze frees the startup's garbage cycles, so none is kept for good.

``--set streamfix_gc_freeze=false`` leaves the collector as mitmproxy has it (and
unfreezes what this addon froze, when set while running).

Cost: one collection at startup (tens of ms); nothing per flow or per event.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger("streamfix")


class Freeze:
    def __init__(self) -> None:
        self.frozen = 0
        """Objects this addon froze (0: none, or unfrozen again)."""

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_gc_freeze",
            bool,
            True,
            """After startup, collect once and freeze what is left (gc.freeze), so that a
            full garbage collection under load walks only the flows in flight, not the
            ~90,000 objects of the process's startup: its pause (every stream waits) is
            shorter. Off: the collector as mitmproxy has it.""",
        )

    def running(self) -> None:
        from mitmproxy import ctx

        if ctx.options.streamfix_gc_freeze:
            self.freeze()
        else:
            logger.debug("streamfix: garbage collector left as it is (streamfix_gc_freeze off)")

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        if "streamfix_gc_freeze" in updated and not ctx.options.streamfix_gc_freeze and self.frozen:
            gc.unfreeze()  # (all of the permanent generation: nothing else here freezes)
            self.frozen = 0

    def freeze(self) -> None:
        gc.collect()
        gc.freeze()
        self.frozen = gc.get_freeze_count()
        logger.debug("streamfix: %d objects of the startup frozen for the garbage collector", self.frozen)
