"""Suite-wide hooks.

``terminal_summary``: a test may attach text with ``record_property("terminal_summary",
text)``; it is printed at the end of the run (also under pytest-xdist, whose workers pass
user properties to the controller with each report). The client matrix uses it.

Process logs: a test (or its fixture) registers the processes it uses with
:func:`support.show_logs_on_failure`; when the test fails, what each printed during the
test is added to the failure report as a section (also under pytest-xdist).
"""

import pytest
from support import LOGS_ON_FAILURE


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
