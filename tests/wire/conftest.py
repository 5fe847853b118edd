"""Every test here is marked ``wire``: tests of wire/, the sans-IO protocol core, in process: bytes
in, bytes out."""

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.wire)  # a folder's conftest sees only the items under it
