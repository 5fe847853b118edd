"""Every test here is marked ``support``: tests of the stand-ins in this folder (the fake Devin,
the CPA stand-in, the fake providers), in process. The folder's modules are the tests' shared
code (on sys.path: pyproject.toml's pythonpath)."""

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.support)  # a folder's conftest sees only the items under it
