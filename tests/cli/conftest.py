"""Every test here is marked ``cli``: tests of streamfix/, what a user runs (the offline checker,
usage, capture, the benchmarks' parts), and of the checkout's own files, in process."""

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.cli)  # a folder's conftest sees only the items under it
