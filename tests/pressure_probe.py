"""Test addon for tests/test_pressure.py: what a running mitmdump holds, on request.

    mitmdump -s addons/repair.py -s tests/pressure_probe.py ...

``GET /__streamfix/state`` (any host) is answered by mitmdump itself, never forwarded, with
a JSON object: ``flows`` (the repair addon's per-flow states), ``pending`` (the
correlator's pending client requests), ``rss_kb`` (the process's resident memory) and
``live_flows`` (HTTPFlow objects still alive). ``?collect=1`` runs a full garbage
collection first.
"""

import gc

import orjson
from mitmproxy import ctx, http

from addons import shared

PATH = "/__streamfix/state"


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
        if "collect=1" in flow.request.path:
            gc.collect()
        repair = ctx.master.addons.get("repair")
        state = {
            "flows": len(repair.flows) if repair is not None else -1,
            "pending": len(shared.correlator().pending),
            "rss_kb": _rss_kb(),
            "live_flows": sum(1 for o in gc.get_objects() if isinstance(o, http.HTTPFlow)),
        }
        flow.response = http.Response.make(200, orjson.dumps(state), {"content-type": "application/json"})


addons = [Probe()]
