"""Objects the addons of one mitmproxy process share.

mitmproxy loads each ``-s`` script as its own module (``__mitmproxy_script__.<name>``),
and a script imported by another (``from addons.upstream import ...``) is yet another copy.
State that both legs must see therefore lives here, in a module that is only ever
imported by its package name, so every copy of every script gets the same object.
"""

from __future__ import annotations

from wire.correlate import Correlator

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
