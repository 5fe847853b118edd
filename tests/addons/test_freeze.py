"""addons/freeze.py: once mitmproxy runs, the startup's garbage is collected and what is
left frozen for the collector (on by default); the real mitmdump: test_freeze_e2e.py."""

from __future__ import annotations

import gc
import weakref

import pytest
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
