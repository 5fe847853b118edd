"""streamfix's protocol core: sans-IO stream repair for LLM gateway responses.

Nothing in this package imports mitmproxy or does I/O: repairers are fed bytes (or
parsed SSE events) and return bytes. ``addons/`` wires them into mitmproxy.
"""

from . import _core

_core.select(__path__)  # the compiled core when it is built from these very sources (wire/_core.py)
