"""The real-CPA stacks these modules share: the fake providers, one real CPA build per (version,
provider) with a sidecar in front, started on first use and kept for the module; and no
sidecar logs a traceback during any test here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cpastacks import Stacks
from standins.fake_providers import Running


@pytest.fixture(scope="module")
def fakes() -> Iterator[Running]:
    r = Running(delay_ms=1)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def stacks(fakes: Running, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stacks]:
    s = Stacks(fakes, tmp_path_factory.mktemp("realcpa"))
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_crash(stacks: Stacks) -> Iterator[None]:
    """Every sidecar started so far (and during the test) logs no traceback meanwhile."""
    marks = {k: len(st.mitm.lines) for k, st in stacks.started.items()}
    yield
    for k, st in stacks.started.items():
        new = "\n".join(st.mitm.lines[marks.get(k, 0) :])
        assert "has crashed" not in new and "Traceback" not in new, f"mitmdump in front of {k}:\n{new}"
