"""addons/freeze.py: once mitmproxy runs, the startup's garbage is collected and what is
left frozen for the collector (on by default), in process and in a real mitmdump."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import support
from mitmproxy.test import taddons
from streamfix.addons.freeze import Freeze


@pytest.fixture
def unfrozen():
    """This test process's collector as it was: nothing frozen before, nothing after."""
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_running_collects_then_freezes_what_is_left(unfrozen):
    addon = Freeze()
    with taddons.context(addon):
        garbage = _Cycle()  # startup garbage: a cycle nothing refers to
        dead = weakref.ref(garbage)
        kept = _Cycle()  # startup state: still referred to
        del garbage
        assert gc.get_freeze_count() == 0
        addon.running()
        assert dead() is None  # collected before the freeze, not kept for good
        assert gc.get_freeze_count() == addon.frozen > 1000
        # a full collection now walks only what came since
        assert kept not in gc.get_objects(generation=2)
        later = _Cycle()
        gc.collect(1)
        assert later in gc.get_objects(generation=2)


def test_off_leaves_the_collector_alone(unfrozen):
    addon = Freeze()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, streamfix_gc_freeze=False)
        addon.running()
        assert gc.get_freeze_count() == 0
        assert addon.frozen == 0


def test_switched_off_while_running_unfreezes(unfrozen):
    addon = Freeze()
    with taddons.context(addon) as tctx:
        addon.running()
        assert gc.get_freeze_count() > 0
        tctx.configure(addon, streamfix_gc_freeze=False)
        assert gc.get_freeze_count() == 0
        assert addon.frozen == 0


def test_a_real_mitmdump_freezes_its_startup_once_running(tmp_path: Path):
    """The repair addon loads it (after the others, so their startup state is frozen too)."""
    proc, _ = support.start_mitmdump("http://127.0.0.1:9", tmp_path / "conf", "--set", "termlog_verbosity=debug")
    try:
        m = proc.wait_for(r"streamfix: (\d+) objects of the startup frozen for the garbage collector")
        assert int(m.group(1)) > 20_000  # mitmproxy's modules, classes and functions, and ours
    finally:
        proc.stop()
    off, _ = support.start_mitmdump(
        "http://127.0.0.1:9",
        tmp_path / "conf2",
        "--set",
        "termlog_verbosity=debug",
        "--set",
        "streamfix_gc_freeze=false",
    )
    try:
        # the addon's own line for this case: its running hook has run (the repair's
        # startup line comes before it, so waiting for that would check too early)
        off.wait_for(r"streamfix: garbage collector left as it is \(streamfix_gc_freeze off\)")
    finally:
        off.stop()
    assert "frozen for the garbage collector" not in off.output
