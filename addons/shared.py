"""Objects the addons of one mitmproxy process share.

mitmproxy loads each ``-s`` script as its own module (``__mitmproxy_script__.<name>``),
and a script imported by another (``from addons.upstream import ...``) is yet another copy.
State that both legs must see therefore lives here, in a module that is only ever
imported by its package name, so every copy of every script gets the same object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamfix.wire.correlate import Correlator

_correlator: Correlator | None = None


def correlator() -> Correlator:
    """The process-wide :class:`wire.correlate.Correlator` (created on first use)."""
    global _correlator
    if _correlator is None:
        _correlator = Correlator()
    return _correlator


def reset() -> Correlator:
    """A fresh correlator (tests)."""
    global _correlator
    _correlator = Correlator()
    return _correlator


def use(correlator: Correlator) -> Correlator:
    """Make ``correlator`` the process-wide one (``addons/workers.py``: one whose state the
    workers share, in Redis)."""
    global _correlator
    _correlator = correlator
    return correlator


worker = ""
"""This process's worker name under ``streamfix sidecar --workers N`` (``streamfix_worker``;
"" for a single sidecar): turn records carry it as ``worker``."""


_held: dict[str, Any] = {}


def held_secrets() -> dict[str, Any]:
    """Flow id -> the request secrets ``addons/redact.py`` holds while mitmweb takes its
    redacted copy of a new flow (restored before the request goes out)."""
    return _held


# --- finished turns -------------------------------------------------------------------
_turn_sinks: list[Callable[[dict[str, Any]], None]] = []


def add_turn_sink(sink: Callable[[dict[str, Any]], None]) -> None:
    """Call ``sink(turn)`` for every finished turn (``addons/turnlog.py`` registers one)."""
    if sink not in _turn_sinks:
        _turn_sinks.append(sink)


def remove_turn_sink(sink: Callable[[dict[str, Any]], None]) -> None:
    if sink in _turn_sinks:
        _turn_sinks.remove(sink)


def has_turn_sinks() -> bool:
    """Is anyone listening (skip building turn records otherwise)?"""
    return bool(_turn_sinks)


def turn_finished(turn: dict[str, Any]) -> None:
    """One client turn is over: hand its facts (a JSON-ready dict, see
    ``addons/turnlog.py`` for the keys; build it with ``addons.turn.Turn.record``) to
    every sink. Any transport calls this once per turn (HTTP from ``addons/repair.py``,
    WebSocket per ``response.create``). Never raises."""
    if worker:
        turn["worker"] = worker
    for sink in _turn_sinks:
        try:
            sink(turn)
        except Exception:
            logging.getLogger("streamfix").exception("streamfix: a turn sink failed")
