"""Test addon for tests/e2e/test_full_chain.py: test-only DNS inside mitmproxy.

    mitmdump ... -s tests/support/e2e_hostmap.py --set e2e_hostmap_file=/tmp/x/hosts.json

``hosts.json`` maps host names to local ports (``{"devin.test": 41234}``); every upstream
connection mitmproxy opens to a mapped host (reverse target, proxied request, CONNECT
tunnel, TLS passthrough) goes to ``127.0.0.1:<port>`` instead. The file is re-read when
it changes, so the servers behind the names can be started after mitmdump (whose ports
they need). Host names, SNI and certificates keep the original name, which is what the
upstream-leg host filter and TLS interception are about.

The name is swapped for the local address only while the connection is opened
(``server_connect``) and put back once it is open (``server_connected``): mitmproxy
reuses an open upstream connection for the next request on the same client connection
only if its address equals the request's host and port. With the local address left in
place, each request on a keep-alive client connection (CPA's, the stand-in's) opened one
more upstream connection and left the last one idle; mitmproxy lets one client
connection hold at most 5 connections per address (a semaphore held while each is open),
so the 6th request waited for as long as the fake Devin kept the idle ones open (aiohttp
closes an idle connection after an hour): a test hung.

Connections an addon opens itself (the gateway check of ``addons/gateway.py``, which
probes the reverse target before a client connection's first request) go through
``socket.getaddrinfo``: for a mapped name it answers ``127.0.0.1`` and the mapped port.
"""

from __future__ import annotations

import json
import os
import socket

from mitmproxy import ctx
from mitmproxy.proxy import server_hooks


class HostMap:
    def __init__(self) -> None:
        self.map: dict[str, int] = {}
        self.mtime = 0.0
        self.named: dict[str, tuple[str, int]] = {}
        """Server connection id -> its original address, while it is being opened."""

    def load(self, loader) -> None:
        loader.add_option("e2e_hostmap_file", str, "", "JSON file: host name -> 127.0.0.1 port.")
        real = socket.getaddrinfo

        def getaddrinfo(host, port, *args, **kwargs):
            name = host.decode() if isinstance(host, bytes) else host
            if isinstance(name, str) and name in self._current():
                return real("127.0.0.1", int(self.map[name]), *args, **kwargs)
            return real(host, port, *args, **kwargs)

        socket.getaddrinfo = getaddrinfo

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
            self.named[data.server.id] = addr
            data.server.address = ("127.0.0.1", int(self.map[addr[0]]))

    def server_connected(self, data: server_hooks.ServerConnectionHookData) -> None:
        addr = self.named.pop(data.server.id, None)
        if addr is not None:
            # Server refuses a new address once open (its __setattr__ guard); this puts
            # back the one the proxy layers asked for, so they see what they expect
            object.__setattr__(data.server, "address", addr)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        self.named.pop(data.server.id, None)


addons = [HostMap()]
