"""Starting and stopping the local processes streamfix runs: replay upstream, mitmdump.

Everything listens on 127.0.0.1 on a free port and is stopped by the caller
(``with running(...)`` or ``stop(proc)``), as the sidecar launcher and the demo do.
:class:`Proc` is the one harness the benchmarks and the end-to-end tests run their
processes with: what a child prints is collected and waited for, bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import CHECKOUT as _CHECKOUT

ROOT = Path(__file__).resolve().parent.parent
"""A checkout's root (wire/, addons/, recordings/ beside streamfix/); installed, site-packages."""
CHECKOUT = _CHECKOUT is not None
"""Running from a checkout (plain or editable install), not from an installed wheel."""


def addons_dir() -> Path:
    """Where the ``-s`` scripts are: the checkout's addons/, or the installed package's."""
    from streamfix import addons

    return Path(addons.__file__).resolve().parent


def tool(name: str) -> str:
    """A console script of this venv (mitmdump, mitmweb), else from PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def start_replay(recordings: Path | None = None) -> tuple[subprocess.Popen, str]:
    """The replay upstream on a free port: (process, base URL)."""
    cmd = [sys.executable, "-m", "streamfix.replay", "--port", "0"]
    if recordings is not None:
        cmd += ["--recordings", str(recordings)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT if CHECKOUT else None, env=child_env())
    assert p.stdout is not None
    line = p.stdout.readline()
    if "listening on " not in line:
        stop(p)
        raise RuntimeError(f"replay upstream did not start: {line!r}")
    return p, line.rsplit("listening on ", 1)[1].strip()


def mitmdump_command(upstream: str, port: int, args: Sequence[str] = (), confdir: Path | None = None) -> list[str]:
    cmd = [
        tool("mitmdump"),
        "--mode",
        f"reverse:{upstream}@127.0.0.1:{port}",
        "-s",
        str(addons_dir() / "repair.py"),
        "--set",
        "connection_strategy=lazy",
    ]  # as the sidecar: a dead upstream is a 502 (addons/gateway.py)
    if confdir is not None:
        cmd += ["--set", f"confdir={confdir}"]
    return cmd + list(args)


def start_mitmdump(
    upstream: str,
    port: int | None = None,
    args: Sequence[str] = (),
    confdir: Path | None = None,
    log: Path | None = None,
) -> tuple[subprocess.Popen, int]:
    """mitmdump with the repair addon in reverse mode in front of ``upstream``."""
    port = port or free_port()
    fp = open(log, "wb") if log is not None else None  # noqa: SIM115 - the child's; ours closed below
    try:
        p = subprocess.Popen(
            mitmdump_command(upstream, port, args, confdir),
            stdout=fp if fp is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            cwd=ROOT if CHECKOUT else None,
            env=child_env(),
        )
    finally:
        if fp is not None:
            fp.close()  # the child has its own copy of the descriptor
    try:
        wait_port(port, proc=p)
    except Exception:
        stop(p)
        raise
    return p, port


def stop(p: subprocess.Popen, timeout: float = 10.0) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for f in (p.stdout, p.stderr):
        if f is not None:
            f.close()


@contextlib.contextmanager
def running(*procs: subprocess.Popen) -> Iterator[None]:
    try:
        yield
    finally:
        for p in procs:
            stop(p)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    if not CHECKOUT:  # installed: the package is importable as it is
        return env
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


START_TIMEOUT = 30.0
"""Seconds a process may take to say it is listening (generous: a loaded 2-core box)."""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Proc:
    """A child process and what it prints (stdout and stderr together), read line by line by
    a thread; or, with ``log``, written to that file and read from it when asked (no
    thread in this process: a benchmark's load generator keeps the CPU to itself).

    ``default_sigint``: the child starts with SIGINT at its default, as a terminal's
    foreground job does, even if this process ignores it (a background job of a
    non-interactive shell, ``cmd &``, inherits SIGINT ignored, and so would the child:
    Python then installs no KeyboardInterrupt handler)."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path | None = ROOT if CHECKOUT else None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        new_session: bool = False,
        default_sigint: bool = False,
    ) -> None:
        self.cmd = list(cmd)
        self.log = log
        self._fp = log.open("wb") if log is not None else None
        self.p = subprocess.Popen(
            self.cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._fp if self._fp is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env if env is not None else child_env(),
            start_new_session=new_session,
            preexec_fn=_default_sigint if default_sigint else None,  # noqa: PLW1509 - signal.signal only, before exec
        )
        self._lines: list[str] = []
        self.times: list[float] = []
        """Wall-clock time (time.time()) each line was read (without ``log``)."""
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None
        if self._fp is None:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    @property
    def pid(self) -> int:
        return self.p.pid

    @property
    def lines(self) -> list[str]:
        """Every line printed so far."""
        if self.log is not None:
            return self.log.read_text("utf-8", "replace").splitlines()
        return self._lines

    def _read(self) -> None:
        assert self.p.stdout is not None
        for raw in self.p.stdout:
            with self._cond:
                self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.times.append(time.time())
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def _wait(self, left: float) -> None:
        if self._reader is not None:
            self._cond.wait(min(left, 0.5))
        else:  # a log file: read again soon
            self._cond.release()
            try:
                time.sleep(min(left, 0.05))
            finally:
                self._cond.acquire()

    def _ended(self) -> bool:
        return self.p.poll() is not None and (self._reader is None or not self._reader.is_alive())

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT, start: int = 0) -> re.Match[str]:
        """The first output line (from line ``start`` on) matching ``pattern``."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                lines = self.lines
                while i < len(lines):
                    m = rx.search(lines[i])
                    i += 1
                    if m:
                        return m
                if self._ended() and i >= len(self.lines):
                    raise RuntimeError(f"{self.cmd[0]} exited ({self.p.returncode}) before {pattern!r}:\n{self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {pattern!r} from {self.cmd[0]} after {timeout}s:\n{self.tail()}")
                self._wait(left)

    def wait_count(self, pattern: str, count: int, timeout: float = 10.0, start: int = 0) -> None:
        """Waits until ``count`` output lines from line ``start`` on match ``pattern``."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(1 for line in self.lines[start:] if rx.search(line)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fewer than {count} lines {pattern!r} after {timeout}s:\n{self.tail()}")
                self._wait(left)

    def since(self, start: int, limit: int = 400) -> str:
        """Output lines from line ``start`` on (at most the last ``limit``), each prefixed
        with the time it was read (when it was)."""
        with self._cond:
            lines = self.lines
            n = len(lines)
            first = max(start, n - limit)
            out = [f"[{first - start} earlier lines left out]"] if first > start else []
            for k in range(first, n):
                if k < len(self.times):
                    t = self.times[k]
                    stamp = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d} "
                else:
                    stamp = ""
                out.append(stamp + lines[k])
            return "\n".join(out) or "(nothing)"

    def tail(self, n: int = 40) -> str:
        with self._cond:
            return "\n".join(self.lines[-n:])

    def signal(self, sig: int) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout: float) -> int:
        rc = self.p.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        return rc

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code. A mitmdump with
        streamfix drains on the first SIGTERM (addons/drain.py: it waits for the streams
        in flight); a second one after a short grace makes it exit at once, with its done
        hooks (turn log, -w)."""
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(min(timeout, 2.0))
            except subprocess.TimeoutExpired:
                self.p.terminate()
                try:
                    self.p.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.p.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        if self.p.stdout is not None:
            self.p.stdout.close()
        if self._fp is not None:
            self._fp.close()
        return self.p.returncode
