"""Every test here is marked ``addons``: tests of addons/, the mitmproxy glue, in process
(mitmproxy's taddons and tflow; no proxy runs)."""

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.addons)  # a folder's conftest sees only the items under it
