"""The launcher's exit code after a drain (streamfix/workers.py), without processes: the
run ends when the last worker's watcher sees every worker's process reaped, and its code
must be the workers' codes whatever order their watchers wake in."""

from __future__ import annotations

import asyncio
import shutil

from streamfix.workers import Launcher


class _Proc:
    """A worker process as asyncio holds it: its return code is known once it is reaped;
    ``wait()`` returns only once its output pipes are closed too (``pipe``)."""

    def __init__(self, pid: int, returncode: int | None) -> None:
        self.pid = pid
        self.returncode = returncode
        self.pipe = asyncio.Event()

    async def wait(self) -> int:
        await self.pipe.wait()
        assert self.returncode is not None
        return self.returncode


def _launcher() -> Launcher:
    la = Launcher(2, None, "127.0.0.1:1", None, [], None, "")
    shutil.rmtree(la.dir, ignore_errors=True)
    return la


async def _drained(codes: tuple[int, int], first_done: int) -> int:
    """Both workers exit during a drain with ``codes``; worker ``first_done``'s output ends
    first, the other's is still being read when the run ends."""
    la = _launcher()
    procs = [_Proc(100 + i, codes[i]) for i in range(2)]
    for w, p in zip(la.workers, procs, strict=True):
        w.proc = p  # type: ignore[assignment]
    la.draining = True
    watchers = [asyncio.create_task(la.watch_worker(w)) for w in la.workers]
    procs[first_done].pipe.set()
    await asyncio.wait_for(la.done.wait(), 5)
    rc = la.exit_code()
    procs[1 - first_done].pipe.set()
    await asyncio.wait_for(asyncio.gather(*watchers), 5)
    assert la.exit_code() == rc, "the code does not depend on when the last watcher woke"
    return rc


def test_a_clean_drain_exits_0_whichever_watcher_wakes_last():
    # (the old code read what the watchers had noted: 1 here, the flaky
    # test_sigterm_drains_every_worker in tests/e2e/test_workers.py)
    assert asyncio.run(_drained((0, 0), 0)) == 0
    assert asyncio.run(_drained((0, 0), 1)) == 0


def test_a_worker_that_failed_its_drain_makes_it_1():
    assert asyncio.run(_drained((0, 1), 0)) == 1
    assert asyncio.run(_drained((1, 0), 0)) == 1
    assert asyncio.run(_drained((0, -15), 1)) == 1
