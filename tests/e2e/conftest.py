"""Every test here is marked ``e2e``: tests that start a process: real mitmdump, the replay
upstream, the stand-ins, real CPA builds, the real clients, a command line or a tool. Every test
outside this folder starts none, so ``-m "not e2e and not clients and not browser"``
(scripts/test's pure-core pass) is the in-process tests."""

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    item.add_marker(pytest.mark.e2e)  # a folder's conftest sees only the items under it
