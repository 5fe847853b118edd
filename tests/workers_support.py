"""Real Redis and HAProxy for the workers' tests (tests/test_workers*.py, tests/test_sharedstate.py).

Debian's ``redis-server`` and ``haproxy`` (``scripts/install-balancer``, which
``scripts/test`` runs, installs them); each is started on 127.0.0.1 on a port picked
here and stopped at the end.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest
from support import Proc, free_port

REDIS = shutil.which("redis-server")
HAPROXY = shutil.which("haproxy")
needs_redis = pytest.mark.skipif(
    REDIS is None, reason="no redis-server on PATH (scripts/install-balancer installs Debian's with apt-get)"
)
needs_balancer = pytest.mark.skipif(
    REDIS is None or HAPROXY is None,
    reason="no haproxy or redis-server on PATH (scripts/install-balancer installs Debian's with apt-get)",
)


class Redis:
    """A redis-server of our own on 127.0.0.1 (no persistence); :meth:`restart` keeps its port."""

    def __init__(self, d: Path, port: int | None = None) -> None:
        self.dir = d
        self.port = port or free_port()
        self.proc: Proc | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS is not None
        self.proc = Proc([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", str(self.dir)], cwd=self.dir)  # fmt: skip
        self.proc.wait_for(r"Ready to accept connections", 30)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def restart(self) -> None:
        self.stop()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the port is free again
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    break
            time.sleep(0.05)
        self.start()
