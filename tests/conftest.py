"""Suite-wide hooks.

``terminal_summary``: a test may attach text with ``record_property("terminal_summary",
text)``; it is printed at the end of the run (also under pytest-xdist, whose workers pass
user properties to the controller with each report). The client matrix uses it.

Process logs: a test (or its fixture) registers the processes it uses with
:func:`support.show_logs_on_failure`; when the test fails, what each printed during the
test is added to the failure report as a section (also under pytest-xdist).

In-process tests stay in process: a test not marked ``e2e``, ``clients`` or ``browser``
(everything outside tests/e2e) that starts a process fails, saying so, so the pure-core
pass (``-m "not e2e and not clients and not browser"``, scripts/test) runs exactly the
tests that start none. (``subprocess.Popen`` is what subprocess.run, asyncio's
subprocesses and mitmproxy's would all go through.)
"""

import os
import subprocess

import pytest
from support import LOGS_ON_FAILURE

_STARTS_PROCESSES = ("e2e", "clients", "browser")
_in_process: list[str] = []
"""The node id of the running test when it must start no process (else empty)."""
_popen_init = subprocess.Popen.__init__
_fork = os.fork


def _no_process(what: str) -> None:
    if _in_process:
        raise AssertionError(
            f"{_in_process[0]} starts a process ({what}) but is not marked e2e: move it to tests/e2e "
            "(a file that also holds in-process tests is split)"
        )


def _guarded_popen(self, *args, **kwargs):
    _no_process(f"subprocess.Popen({str(args[0] if args else kwargs.get('args'))[:80]})")
    _popen_init(self, *args, **kwargs)


def _guarded_fork():
    _no_process("os.fork()")
    return _fork()


subprocess.Popen.__init__ = _guarded_popen  # type: ignore[method-assign]
os.fork = _guarded_fork


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not any(item.get_closest_marker(m) for m in _STARTS_PROCESSES):
        _in_process.append(item.nodeid)
    try:
        return (yield)
    finally:
        _in_process.clear()


def pytest_report_header(config):
    import streamfix.wire._core
    import streamfix.wire.apis  # imports every compiled module

    return f"streamfix protocol core: {streamfix.wire._core.describe()}"


_SUMMARIES: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _SUMMARIES.extend(v for k, v in report.user_properties if k == "terminal_summary")


def pytest_terminal_summary(terminalreporter):
    for text in _SUMMARIES:
        terminalreporter.write_sep("=", "streamfix summary")
        terminalreporter.write_line(text)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for title, text in item.stash.get(LOGS_ON_FAILURE, {}).items():
            report.sections.append((title, text()))
    return report
