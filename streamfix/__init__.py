"""streamfix: a mitmproxy addon that repairs LLM gateway streams in flight.

Installed (a wheel, ``pip install .``, pipx), everything is this one package: the
protocol core is ``streamfix.wire``, the mitmproxy addons ``streamfix.addons`` (``streamfix
addon-path`` prints the ``-s`` script), the demo's recordings ``streamfix/_recordings``. A
checkout keeps them at its top, as ``wire/``, ``addons/`` and ``recordings/`` beside this
folder; the same names reach them there through this package's search path, so code,
tests and ``mitmdump -s addons/repair.py`` import ``streamfix.wire`` and
``streamfix.addons`` either way.
"""

from __future__ import annotations

from pathlib import Path as _Path

_top = _Path(__file__).resolve().parent.parent
CHECKOUT: _Path | None = _top if (_top / "wire" / "__init__.py").is_file() and (_top / "addons").is_dir() else None
"""The checkout's root when running from one (plain or editable), else None (installed)."""

if CHECKOUT is not None and str(CHECKOUT) not in __path__:
    __path__.append(str(CHECKOUT))  # streamfix.wire -> wire/, streamfix.addons -> addons/
