"""Suite-wide hooks.

``terminal_summary``: a test may attach text with ``record_property("terminal_summary",
text)``; it is printed at the end of the run (also under pytest-xdist, whose workers pass
user properties to the controller with each report). The client matrix uses it.
"""

_SUMMARIES: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _SUMMARIES.extend(v for k, v in report.user_properties if k == "terminal_summary")


def pytest_terminal_summary(terminalreporter):
    for text in _SUMMARIES:
        terminalreporter.write_sep("=", "streamfix summary")
        terminalreporter.write_line(text)
