"""Test addon for tests/test_full_chain.py: test-only DNS inside mitmproxy.

    mitmdump ... -s tests/e2e_hostmap.py --set e2e_hostmap_file=/tmp/x/hosts.json

``hosts.json`` maps host names to local ports (``{"devin.test": 41234}``); every upstream
connection mitmproxy opens to a mapped host (reverse target, proxied request, CONNECT
tunnel, TLS passthrough) goes to ``127.0.0.1:<port>`` instead. The file is re-read when
it changes, so the servers behind the names can be started after mitmdump (whose ports
they need). Host names, SNI and certificates keep the original name, which is what the
upstream-leg host filter and TLS interception are about.
"""

from __future__ import annotations

import json
import os

from mitmproxy import ctx
from mitmproxy.proxy import server_hooks


class HostMap:
    def __init__(self) -> None:
        self.map: dict[str, int] = {}
        self.mtime = 0.0

    def load(self, loader) -> None:
        loader.add_option("e2e_hostmap_file", str, "", "JSON file: host name -> 127.0.0.1 port.")

    def _current(self) -> dict[str, int]:
        path = ctx.options.e2e_hostmap_file
        if path:
            try:
                m = os.stat(path).st_mtime
                if m != self.mtime:
                    with open(path) as f:
                        self.map = json.load(f)
                    self.mtime = m
            except (OSError, ValueError):
                pass
        return self.map

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        addr = data.server.address
        if addr and addr[0] in self._current():
            data.server.address = ("127.0.0.1", int(self.map[addr[0]]))


addons = [HostMap()]
