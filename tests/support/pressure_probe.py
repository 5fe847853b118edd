"""Test addon for tests/e2e/test_pressure.py: what a running mitmdump holds, on request.

    mitmdump -s addons/repair.py -s tests/support/pressure_probe.py ...

``GET /__streamfix/state`` (any host) is answered by mitmdump itself, never forwarded, with
a JSON object: ``flows`` (the repair addon's per-flow states), ``pending`` (the
correlator's pending client requests), ``rss_kb`` (the process's resident memory) and
``live_flows`` (HTTPFlow objects still alive). ``?collect=1`` runs a full garbage
collection first. ``?garbage=1`` runs one that keeps what it finds and adds
``garbage``: how many objects of streamfix's own types (``addons.*``, ``wire.*``) only
that collection could free, by type, and ``garbage_flows`` (HTTPFlow objects among it);
with ``STREAMFIX_GC_OFF=1`` in mitmdump's environment the collector is off from the start,
so that is everything reference counting left behind (tests/support/abort_memory.py).
"""

import gc
import os
from collections import Counter

import orjson
from mitmproxy import ctx, http
from streamfix.addons import shared

PATH = "/__streamfix/state"

if os.environ.get("STREAMFIX_GC_OFF") == "1":
    gc.disable()


def _garbage() -> tuple[dict[str, int], int]:
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = list(gc.garbage)
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    ours = Counter(
        f"{type(o).__module__}.{type(o).__qualname__}"
        for o in found
        if type(o).__module__.startswith(("addons", "wire"))
    )
    flows = sum(1 for o in found if isinstance(o, http.HTTPFlow))
    del found
    return dict(ours), flows


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class Probe:
    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.method != "GET" or flow.request.path.split("?", 1)[0] != PATH:
            return
        garbage = None
        if "garbage=1" in flow.request.path:
            garbage = _garbage()
        elif "collect=1" in flow.request.path:
            gc.collect()
        repair = ctx.master.addons.get("repair")
        state = {
            "flows": len(repair.flows) if repair is not None else -1,
            "pending": len(shared.correlator().pending),
            "rss_kb": _rss_kb(),
            "live_flows": sum(1 for o in gc.get_objects() if isinstance(o, http.HTTPFlow)),
        }
        if garbage is not None:
            state["garbage"], state["garbage_flows"] = garbage
        flow.response = http.Response.make(200, orjson.dumps(state), {"content-type": "application/json"})


addons = [Probe()]
