"""Real processes for end-to-end tests: the replay upstream, mitmdump, the sidecar.

Every process listens on 127.0.0.1 on a port the OS picked (``--port 0``, ``@127.0.0.1:0``)
and says which in its first log lines, so parallel test workers never race for a port.
Its output is read by a thread into memory (the pipe never fills up, and tests can
assert on log lines); every wait has a timeout; :meth:`Proc.stop` ends the process by its
own id and is safe to call twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamfix.procs import START_TIMEOUT, Proc

if TYPE_CHECKING:
    from streamfix.recordings import Recording

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
"""This folder: the tests' shared code, the stand-ins and the test addons (``-s`` scripts)."""
REPAIR_ADDON = ROOT / "addons" / "repair.py"


def compiled_core() -> bool:
    """This process runs wire/'s compiled core (mypyc; wire/_core.py), not the pure one."""
    import streamfix.wire._core
    import streamfix.wire.apis  # imports every compiled module

    return streamfix.wire._core.describe().startswith("compiled")


pure_only = pytest.mark.skipif(
    compiled_core(),
    reason="patches a wire/ class or module global at run time, which compiled (mypyc) code does not see; "
    "runs in scripts/test's pure-build pass (STREAMFIX_PURE=1)",
)


def tool(name: str) -> str:
    """A console script next to this interpreter (mitmdump), else the bare name."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


LOGS_ON_FAILURE = pytest.StashKey[dict]()
"""``item.stash`` key: report section title -> callable giving its text (tests/conftest.py)."""


def show_logs_on_failure(request: pytest.FixtureRequest, procs: dict[str, Proc]) -> None:
    """If the running test fails, its report shows what each of ``procs`` (name ->
    process) printed from now on, each line with the time it was read."""
    logs = request.node.stash.setdefault(LOGS_ON_FAILURE, {})
    for name, proc in procs.items():
        logs[f"output of {name}"] = functools.partial(proc.since, len(proc.lines))


def start_replay(recordings: Path | None = None, timeout: float = START_TIMEOUT) -> tuple[Proc, str]:
    """``python -m streamfix.replay --port 0``: (process, base URL like http://127.0.0.1:PORT)."""
    cmd = [sys.executable, "-m", "streamfix.replay", "--port", "0"]
    if recordings is not None:
        cmd += ["--recordings", str(recordings)]
    proc = Proc(cmd)
    try:
        m = proc.wait_for(r"listening on (http://\S+)", timeout)
    except BaseException:
        proc.stop()
        raise
    return proc, m.group(1)


def mitmdump_args(confdir: Path, *args: str, addons: Sequence[Path] = (REPAIR_ADDON,)) -> list[str]:
    cmd = [tool("mitmdump"), "--set", f"confdir={confdir}"]
    if not any(a.startswith("flow_detail=") for a in args):  # mitmdump refuses an option given twice
        cmd += ["--set", "flow_detail=0"]
    for a in addons:
        cmd += ["-s", str(a)]
    return cmd + list(args)


def start_mitmdump(
    upstream: str,
    confdir: Path,
    *args: str,
    addons: Sequence[Path] = (REPAIR_ADDON,),
    timeout: float = START_TIMEOUT,
) -> tuple[Proc, int]:
    """mitmdump in reverse mode in front of ``upstream``: (process, listen port).

    Startup errors of an addon script (which mitmdump logs and survives) fail here.
    """
    cmd = mitmdump_args(confdir, "--mode", f"reverse:{upstream}@127.0.0.1:0", *args, addons=addons)
    proc = Proc(cmd)
    try:
        m = proc.wait_for(r"listening at 127\.0\.0\.1:(\d+)", timeout)
        if "error in script" in proc.output or "Traceback" in proc.output:
            raise RuntimeError(f"an addon failed to load:\n{proc.tail()}")
    except BaseException:
        proc.stop()
        raise
    return proc, int(m.group(1))


@dataclasses.dataclass
class ProxyStack:
    """A copy of the recordings, the replay upstream serving it, mitmdump in front."""

    root: Path
    replay: Proc
    upstream: str
    mitm: Proc
    proxy: str

    def rec(self, name: str) -> Recording:
        from streamfix.recordings import load

        return load(name, self.root)


@contextlib.contextmanager
def replay_and_proxy(
    root: Path, confdir: Path, *args: str, addons: Sequence[Path] = (REPAIR_ADDON,)
) -> Iterator[tuple[Proc, str, Proc, str]]:
    """The replay upstream of ``root`` and a mitmdump in front of it: (replay, its base
    URL, mitmdump, the proxy's base URL); both stopped at the end."""
    replay, upstream = start_replay(root)
    try:
        mitm, port = start_mitmdump(upstream, confdir, *args, addons=addons)
    except BaseException:
        replay.stop()
        raise
    try:
        yield replay, upstream, mitm, f"http://127.0.0.1:{port}"
    finally:
        mitm.stop()
        replay.stop()


def no_crash_during(request: pytest.FixtureRequest, mitm: Proc, replay: Proc) -> Iterator[None]:
    """For an autouse fixture (``yield from``): mitmproxy logs "has crashed" when a hook or
    stream callable raises, which must never happen during the test; a failing test's
    report shows what mitmdump and the replay upstream printed meanwhile."""
    show_logs_on_failure(request, {"mitmdump": mitm, "replay upstream": replay})
    start = len(mitm.lines)
    yield
    new = "\n".join(mitm.lines[start:])
    assert "has crashed" not in new and "Traceback" not in new, new


def run_mitmdump(
    confdir: Path, *args: str, addons: Sequence[Path] = (REPAIR_ADDON,), timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """A mitmdump that ends by itself (``-nr``): waits for it, bounded."""
    return subprocess.run(
        mitmdump_args(confdir, *args, addons=addons),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env(),
        timeout=timeout,
    )


class ChunkedUpstream:
    """A raw HTTP/1.1 upstream on 127.0.0.1 for what a real server does not do on request
    (cut a body mid-stream, reset a connection): one thread per connection reads one
    request, then :meth:`respond` (a subclass's) writes the answer on the socket."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:  # the client went away before its request was whole
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), 0
            )
            while len(body) < length:
                got = conn.recv(65536)
                if not got:
                    return
                body += got
            self.respond(conn, head.split(b" ")[1].decode(), body)

    def respond(self, conn: socket.socket, path: str, body: bytes) -> None:
        raise NotImplementedError

    @staticmethod
    def start_sse(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

    @staticmethod
    def chunk(conn: socket.socket, data: bytes) -> None:
        conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    @staticmethod
    def reset(conn: socket.socket) -> None:
        """Close with a TCP reset (SO_LINGER 0) when the connection is closed."""
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self) -> None:
        self.sock.close()


def dechunk(raw: bytes) -> bytes:
    """The body of a raw chunked HTTP/1.1 response, as far as it got."""
    _, _, rest = raw.partition(b"\r\n\r\n")
    out = b""
    while rest:
        size, sep, rest = rest.partition(b"\r\n")
        if not sep or not size:
            break
        n = int(size, 16)
        if n == 0 or len(rest) < n:
            break
        out += rest[:n]
        rest = rest[n + 2 :]
    return out


def free_port() -> int:
    """A port nothing listens on right now (for programs that cannot take port 0)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_gone(pids: Sequence[int], timeout: float = 10.0) -> list[int]:
    """Waits until none of ``pids`` runs; returns those still running at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_pids(pids: Sequence[int]) -> None:
    """SIGKILL each of ``pids`` that still runs (teardown of orphans we started)."""
    for p in pids:
        if alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


# --- a streaming HTTP/1.1 client ------------------------------------------------------
class Received:
    """A response read as it streamed: raw body bytes (no content decoding) with the
    monotonic time each read arrived, and the time the request was sent."""

    def __init__(
        self, status: int, headers, sent_at: float, reads: list[tuple[float, bytes]], wall: tuple[float, float]
    ) -> None:
        self.status = status
        self.headers = headers
        self.sent_at = sent_at
        self.reads = reads
        self.wall = wall
        """Wall-clock (time.time()) bounds of the exchange: request sent, body complete."""

    @property
    def body(self) -> bytes:
        return b"".join(c for _, c in self.reads)

    def event_times(self) -> list[float]:
        """Arrival time of each complete SSE event (parsed as the client sees them)."""
        from streamfix.wire.sse import SseParser

        p = SseParser()
        times: list[float] = []
        for t, c in self.reads:
            times += [t] * len(p.feed(c))
        return times


def fetch(
    url: str, *, method: str = "POST", body: bytes = b"", headers: dict[str, str] | None = None, timeout: float = 30.0
) -> Received:
    """One request over a fresh HTTP/1.1 connection; every read is bounded by ``timeout``
    and so is the whole exchange."""
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(http1=True, http2=False, timeout=timeout, trust_env=False) as client:
        sent, sent_wall = time.monotonic(), time.time()
        with client.stream(method, url, content=body, headers=headers or {}) as r:
            reads: list[tuple[float, bytes]] = []
            for chunk in r.iter_raw():
                reads.append((time.monotonic(), chunk))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url}: still streaming after {timeout}s")
            return Received(r.status_code, r.headers, sent, reads, (sent_wall, time.time()))


# --- comparing bodies -----------------------------------------------------------------
def _events(body: bytes) -> list[bytes]:
    from streamfix.wire.sse import SseParser

    p = SseParser()
    return [e.raw for e in p.feed(body) + p.close()]


def live_expected(rec: Recording, got: Received) -> bytes:
    """The recording's expected body as a live flow gets it.

    A ``created_at`` the repairer fills is the flow's start second (the recording's
    ``started_at`` in expected.body, which offline repair reproduces): here it must be the
    one second, within the exchange's wall-clock bounds, that the client saw.
    """
    want = rec.expected
    started = rec.meta.get("started_at")
    pat = b'"created_at":%d' % started if isinstance(started, int) else None
    if pat is None or pat not in want:
        return want
    lo, hi = int(got.wall[0]), int(got.wall[1])
    seen = {int(v) for v in re.findall(rb'"created_at":(\d+)', got.body) if lo <= int(v) <= hi}
    if len(seen) != 1:
        return want  # the comparison fails and shows the difference
    return want.replace(pat, b'"created_at":%d' % seen.pop())


def assert_same(got: bytes, want: bytes) -> None:
    """Byte equality, with an event-by-event diff when it fails."""
    if got != want:
        assert [e.decode("utf-8", "replace") for e in _events(got)] == [
            e.decode("utf-8", "replace") for e in _events(want)
        ]
        assert got == want  # same events, different bytes in between (cannot happen)


def tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (as they are in the working tree), as a clone has them."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for n in filter(None, names):
        src = ROOT / n.decode()
        if src.is_file():
            (dest / n.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / n.decode())
    untracked_new = [p for p in ("setup.py",) if (ROOT / p).is_file() and not (dest / p).exists()]
    for p in untracked_new:  # a file added in the working tree but not yet committed
        shutil.copy2(ROOT / p, dest / p)
    return dest
