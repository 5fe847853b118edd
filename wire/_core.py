"""Which build of wire/ a process runs: the compiled core (mypyc) or the pure-Python one.

There is one source of every rule, the ``.py`` files in this package. ``scripts/bootstrap``
compiles the hot modules (:data:`COMPILED`) with mypyc (``python -m streamfix.compiled``)
into ``build/compiled/<tag>-<key>/``, outside the source tree, where ``<key>`` is a hash
of every ``.py`` and ``.c`` file of wire/. The build also holds the C twins
(:data:`NATIVE`): a faster copy of one read a compiled module defines, which answers
only where it gives the definition's answer and leaves the rest to it (tests hold the
two together); the pure build has none. At import, :func:`select` puts that directory in front of
the package's ``__path__`` only when its key is the key of the sources as they are now, so
an edit to wire/ can never run old compiled code: the process runs the pure build (and
says so) until ``scripts/bootstrap`` builds the new key. ``STREAMFIX_PURE=1`` runs the
pure build even when a matching compiled one exists (the unit tests run on both).

This module itself is never compiled, and imports only the standard library.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

COMPILED = (
    "sse",
    "skim",
    "stream",
    "responses",
    "response_base",
    "response_continuation",
    "response_replay",
    "response_skim",
    "response_terminal",
    "response_json",
    "response_items",
    "response_usage",
    "chat",
    "holding",
    "messages",
    "gemini",
    "foreign",
    "rules",
    "verdict",
    "toolcalls",
    "replay",
    "upstream_call",
    "upstream_decoders",
    "fastread",
)
"""The modules mypyc compiles: the per-event path of every API's repairer."""
NATIVE = ("_fastread",)
"""C twins the compiled core also builds, each from ``wire/<name>.c``: a faster read of
what a compiled module defines (its docstring says which), used where it decides; never
the only definition of a rule (the pure build has none of them)."""

PURE_ENV = "STREAMFIX_PURE"

HERE = Path(__file__).resolve().parent
BUILDS = HERE.parent / "build" / "compiled"
"""Where compiled builds live: a checkout's ``build/`` (ignored by git); installed (a wheel
built where a C compiler was found: setup.py), ``streamfix/build/compiled`` in site-packages."""
INSTALLED = (HERE.parent / "__init__.py").is_file()
"""This wire/ is the installed package ``streamfix.wire`` (pip, pipx, the image), not a checkout's."""
HOW = (
    "`streamfix core --build` builds it (needs a C compiler and mypy), or reinstall where a C compiler is found"
    if INSTALLED
    else "scripts/bootstrap builds it where a C compiler is found"
)
"""How to get the compiled core, where this copy of wire/ lives."""

state = "pure (not selected yet)"
"""What :func:`select` chose, for :func:`describe`."""


def key(src: Path = HERE) -> str:
    """The build key of the sources in ``src``: the interpreter's tag and a hash of the
    name and bytes of every ``.py`` and ``.c`` file (any edit gives a new key)."""
    h = hashlib.sha256()
    for p in sorted([*src.glob("*.py"), *src.glob("*.c")]):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return f"{sys.implementation.cache_tag}-{h.hexdigest()[:16]}"


def wanted() -> bool:
    """False when ``STREAMFIX_PURE`` asks for the pure build."""
    return os.environ.get(PURE_ENV, "").strip().lower() in ("", "0", "no", "false")


def select(path: list[str]) -> str:
    """Put the compiled build of these sources first on the package's ``path`` when there
    is one (and it is wanted); what was chosen and why, as :func:`describe` says it."""
    global state
    if not wanted():
        state = f"pure ({PURE_ENV}=1)"
        return state
    try:
        d = BUILDS / key()
    except OSError as e:  # unreadable sources: nothing to match them against
        state = f"pure (sources not readable: {e})"
        return state
    if (d / "wire").is_dir() and (d / "runtime").is_dir():
        path.insert(0, str(d / "wire"))
        if str(d / "runtime") not in sys.path:
            sys.path.append(str(d / "runtime"))  # mypyc's shared runtime module (a unique name)
        state = f"compiled (mypyc, {d})"
    elif BUILDS.is_dir() and any(BUILDS.glob(f"{sys.implementation.cache_tag}-*")):
        state = f"pure (the compiled build is of other sources: wire/ changed since it was built; {HOW})"
    else:
        state = f"pure (no compiled build: {HOW})"
    return state


def describe() -> str:
    """One phrase for the startup log: ``compiled (...)`` or ``pure (...)``, from what
    was actually imported (a compiled module is an extension module, not a ``.py``)."""
    mods = [sys.modules.get(f"streamfix.wire.{m}") for m in COMPILED]
    files = [getattr(m, "__file__", "") or "" for m in mods if m is not None]
    native = [f for f in files if not f.endswith(".py")]
    if native and len(native) == len(files):
        return state if state.startswith("compiled") else f"compiled ({state})"
    if native:
        return f"mixed ({len(native)} of {len(files)} loaded modules compiled; {state})"
    return state if state.startswith("pure") else f"pure ({state}; no compiled module loaded)"
