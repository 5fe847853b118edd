"""Test addon for tests/e2e/test_e2e.py: makes one flow's repairer raise, on request.

    mitmdump -s addons/repair.py -s tests/support/e2e_inject.py ...

Loaded after ``addons/repair.py`` (hooks run in ``-s`` order), its ``responseheaders`` wraps
the repairer that repair.py has just installed for the flow:

- ``X-E2E-Raise-At: N`` (request header): the repairer raises on the N-th event (0-based);
- ``X-E2E-Raise-At: end``: it raises in ``end()``.

It answers with the response header ``X-E2E-Injected: 1`` so that a test can tell an
injected failure from a flow the repair addon never streamed.
"""

from typing import Any

from mitmproxy import http
from streamfix.wire.stream import EventRepairer


class RaisingRepairer(EventRepairer):
    """Delegates to the real repairer, except for the one call that raises. It is an
    EventRepairer itself (the compiled core's StreamRepair takes no other type), and the
    lists the driver reads when it fails open (``held``, ``notes``) are the real
    repairer's own; its counts (``changed``, ``fired``) stay its own zeros."""

    def __init__(self, inner: Any, at: str) -> None:
        super().__init__()
        self.held = inner.held
        self.notes = inner.notes
        self._inner = inner
        self._at = at
        self._n = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def event(self, ev: Any) -> list[bytes]:
        if self._at == str(self._n):
            raise RuntimeError("injected by tests/support/e2e_inject.py")
        self._n += 1
        return self._inner.event(ev)

    def end(self) -> list[bytes]:
        if self._at == "end":
            raise RuntimeError("injected by tests/support/e2e_inject.py at end")
        return self._inner.end()


class Inject:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        at = flow.request.headers.get("x-e2e-raise-at")
        stream = flow.response.stream if flow.response else None
        repair = getattr(stream, "repair", None)  # repair.py's FlowStream -> StreamRepair
        if not at or repair is None or not hasattr(repair, "repairer"):
            return
        repair.repairer = RaisingRepairer(repair.repairer, at)
        flow.response.headers["x-e2e-injected"] = "1"


addons = [Inject()]
