"""Starting and stopping the local processes streamfix runs: replay upstream, mitmdump.

Everything listens on 127.0.0.1 on a free port and is stopped by the caller
(``with running(...)`` or ``stop(proc)``). Used by the sidecar launcher, the demo, the
benchmarks and the end-to-end tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
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
