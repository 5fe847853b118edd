"""The client leg's options: their names, help texts and choices, registered and checked
in one place (``addons/repair.py``'s ``load`` and ``configure`` call these).

Every repair rule is a bool option, ``streamfix_<rule>``, derived from the rule's one
declaration in wire/rules.py (its help, its default); the policy options (mode,
truncation, evidence, kept bodies) sit beside them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path

from mitmproxy import exceptions
from mitmproxy.proxy import mode_specs
from streamfix.wire.rules import Rules, declared
from streamfix.wire.verdict import SOURCES

logger = logging.getLogger("streamfix")

RULES = declared()
"""Every repair rule's declaration (wire/rules.py): its option, help and default come from it."""
RULE_OPTIONS: dict[str, str] = {r.option: name for name, r in RULES.items()}
"""Option name -> :class:`~wire.rules.Rules` field."""
DEFAULTS = Rules()
TRUNCATION_CHOICES = ("incomplete", "completed", "off")
MODE_CHOICES = ("repair", "check")


def add_options(loader) -> None:
    """Register every client-leg option."""
    loader.add_option("streamfix", bool, True, "Repair LLM gateway responses (master switch).")
    loader.add_option(
        "streamfix_mode",
        str,
        "repair",
        """'repair' repairs the streams; 'check' changes no byte and reports every
        violation of the stream contract (wire/contract.py) per flow: in the log, the
        flow comment and the receipt.""",
        choices=list(MODE_CHOICES),
    )
    for r in RULES.values():
        loader.add_option(r.option, bool, getattr(DEFAULTS, r.name), r.help)
    loader.add_option(
        "streamfix_truncation",
        str,
        "incomplete",
        """What a truncation verdict does: 'incomplete' ends a Responses stream with
        response.incomplete (the spec; chat gets finish_reason length, messages
        stop_reason max_tokens, Gemini MAX_TOKENS); 'completed' keeps Responses'
        response.completed (for clients that rather feed the broken call back to the
        model, as Codex does) while the other APIs still report the truncation; 'off'
        rewrites no terminal.""",
        choices=list(TRUNCATION_CHOICES),
    )
    loader.add_option(
        "streamfix_evidence",
        Sequence[str],
        list(SOURCES),
        f"Evidence sources the truncation verdict may use (repeat the option or separate "
        f"with commas): {', '.join(SOURCES)}.",
    )
    loader.add_option(
        "streamfix_skim",
        bool,
        True,
        """Read the common deltas of a stream without parsing their JSON (wire/skim.py:
        an event in the layout of the last one the full path handled goes through the
        same rules; the output is the same byte for byte, which the tests check). Off:
        every event is parsed, and the repair's own work per event is about 2-3 times
        as much (docs/benchmarks.md, "Skimming").""",
    )
    loader.add_option(
        "streamfix_keep_bodies",
        bool,
        False,
        """Keep each repaired streamed flow's original and repaired body (for mitmweb's
        views and saved flows; -w keeps them without this option, also for a stream
        that ended early). Costs memory per flow; off for a sidecar.""",
    )


def check_choices(opts, updated: set[str]) -> None:
    """Raise :class:`mitmproxy.exceptions.OptionsError` for a choice option set to a value
    it does not take."""
    if "streamfix_mode" in updated and opts.streamfix_mode not in MODE_CHOICES:
        raise exceptions.OptionsError(
            f"streamfix_mode must be one of {', '.join(MODE_CHOICES)}, not {opts.streamfix_mode!r}"
        )
    if "streamfix_truncation" in updated and opts.streamfix_truncation not in TRUNCATION_CHOICES:
        raise exceptions.OptionsError(
            f"streamfix_truncation must be one of {', '.join(TRUNCATION_CHOICES)}, not {opts.streamfix_truncation!r}"
        )


def evidence(opts) -> frozenset[str]:
    """The evidence sources named by ``streamfix_evidence``: repeated ``--set
    streamfix_evidence=a --set ...`` or one comma-separated value."""
    return evidence_names(opts.streamfix_evidence)


def evidence_names(values) -> frozenset[str]:
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    bad = [n for n in names if n not in SOURCES]
    if bad:
        raise exceptions.OptionsError(
            f"unknown streamfix_evidence source(s) {', '.join(map(repr, bad))}; known: {', '.join(SOURCES)}"
        )
    return frozenset(names)


def rules_changed(updated: set[str]) -> bool:
    return bool(updated & (set(RULE_OPTIONS) | {"streamfix_truncation"}))


def rules(opts) -> Rules:
    """The :class:`wire.rules.Rules` the options ask for."""
    return replace(
        Rules(),
        truncation=opts.streamfix_truncation,
        **{rule: getattr(opts, name) for name, rule in RULE_OPTIONS.items()},
    )


# --- what users type: checked before anything is served ------------------------------
# mitmproxy keeps a ``--set`` for an option no addon has registered yet as unconverted
# strings (``OptManager.deferred``) and converts them right after a script's addons have
# registered theirs (``AddonManager.register`` -> ``process_deferred``). A value it cannot
# convert (``streamfix_status=off``: its bools take only true/false) raises there, inside
# the script loader's task, and the script never joins the addon chain: no error, no log
# line, nothing repaired (``mitmproxy/addons/script.py`` ``Script.loadscript``). A name no
# addon registers stays deferred without a word (mitmproxy/mitmproxy#5371). So each ``-s``
# script ends its ``addons`` list with a :class:`Guard`: its ``load`` runs after the
# script's other addons registered their options and before ``process_deferred``, converts
# the script's deferred values itself (bools as users write them), and logs an error for a
# value it cannot take instead of letting the conversion fail. mitmdump and mitmweb exit
# on an error logged during startup (their ``errorcheck`` addon). The launcher
# (``streamfix/sidecar.py``) runs the same checks on its ``--set`` arguments first.

PREFIX = "streamfix"


def value_checks() -> dict:
    """Option name -> the check of a value beyond its type and choices (raises OptionsError
    with one line: what is wrong and the fix), the one the option's addon runs in
    ``configure``; run here on what users typed (``--set``, config.yaml) before anything is
    served, so that no value can fail later, in ``configure``, with a traceback."""
    from . import drain, listeners, metrics, traces, turnlog, upstream_hosts

    checks = {"streamfix_evidence": evidence_names}
    for module in (metrics, drain, turnlog, listeners, upstream_hosts, traces):
        checks.update(module.CHECKS)
    return checks


BOOL_WORDS = {"true": True, "false": False, "on": True, "off": False, "yes": True, "no": False, "1": True, "0": False}
BOOL_ACCEPTED = "true/false, on/off, yes/no or 1/0"


def parse_value(name: str, typespec, choices, values: list[str], current=None):
    """The value ``--set name=v`` (``values``: every v given for ``name``, none for a bare
    ``--set name``) means for an option of ``typespec``/``choices``; raises
    :class:`mitmproxy.exceptions.OptionsError` naming what it accepts."""
    from mitmproxy import optmanager

    if typespec is bool:
        if len(values) > 1:
            raise exceptions.OptionsError(f"{name} is given {len(values)} times ({', '.join(values)}); give it once")
        if not values:
            return True  # --set streamfix_status: mitmproxy's shorthand for true
        v = values[0].strip().lower()
        if v == "toggle":
            return not current
        if v in BOOL_WORDS:
            return BOOL_WORDS[v]
        raise exceptions.OptionsError(f"{name}={values[0]}: not a boolean; use {BOOL_ACCEPTED}")
    if choices:
        if len(values) != 1 or values[0] not in choices:
            got = f"={values[0]}" if len(values) == 1 else (" without a value" if not values else f" {values}")
            raise exceptions.OptionsError(f"{name}{got}: must be one of {', '.join(choices)}")
        return values[0]
    o = optmanager._Option(name, typespec, current, "", None)
    try:
        return optmanager.OptManager()._parse_setval(o, values)
    except exceptions.OptionsError as e:
        raise exceptions.OptionsError(f"{name}: {e}") from None


def check_value(name: str, typespec, choices, value) -> None:
    """A value that did not come as strings (a config file's): of the option's type and
    among its choices, else :class:`~mitmproxy.exceptions.OptionsError`."""
    from mitmproxy.utils import typecheck

    try:
        typecheck.check_option_type(name, value, typespec)
    except TypeError as e:
        raise exceptions.OptionsError(str(e)) from None
    if choices and value not in choices:
        raise exceptions.OptionsError(f"{name}={value}: must be one of {', '.join(choices)}")


def unknown(name: str, known) -> str:
    """The message for an option name no addon registers, with the closest known one."""
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown option {name}{hint} (scripts/sidecar --options or streamfix sidecar --options lists them)"


def check_specs(registered, specs: Sequence[str]) -> list[str]:
    """Every problem with ``--set`` specs (``name=value`` or ``name``) for ``streamfix``
    options, given the registered options (name -> mitmproxy ``_Option``); [] if none."""
    grouped: dict[str, list[str]] = {}
    for spec in specs:
        name, eq, value = spec.partition("=")
        grouped.setdefault(name, [])
        if eq:
            grouped[name].append(value)
    errors = []
    checks = value_checks()
    for name, values in grouped.items():
        if not name.startswith(PREFIX):
            continue
        o = registered.get(name)
        if o is None:
            errors.append(unknown(name, [n for n in registered if n.startswith(PREFIX)]))
            continue
        try:
            value = parse_value(name, o.typespec, o.choices, values, o.default)
            if name in checks:
                checks[name](value)
        except exceptions.OptionsError as e:
            errors.append(str(e))
    return errors


def check_config_file(registered, confdir: Path, skip: AbstractSet[str] = frozenset()) -> list[str]:
    """Every problem with the ``streamfix`` options in mitmproxy's ``confdir/config.yaml``
    (and ``config.yml``, which mitmproxy reads too), as the Guard would find them once
    mitmdump runs; names in ``skip`` (given with ``--set``, which wins) are not checked."""
    from ruamel.yaml import YAML  # mitmproxy's own YAML library

    errors = []
    checks = value_checks()
    for f in (confdir / "config.yaml", confdir / "config.yml"):
        try:
            data = YAML(typ="safe").load(f.read_text())
        except OSError:
            continue
        except Exception as e:  # noqa: BLE001 - ruamel's many error types; mitmdump would stop on it too
            errors.append(f"{f}: not valid YAML ({' '.join(str(e).split())[:200]})")
            continue
        for name, value in (data or {}).items() if isinstance(data, dict) else ():
            name = str(name)
            if not name.startswith(PREFIX) or name in skip:
                continue
            o = registered.get(name)
            if o is None:
                errors.append(f"{f}: {unknown(name, [n for n in registered if n.startswith(PREFIX)])}")
                continue
            try:
                if o.typespec is bool and isinstance(value, str):
                    value = parse_value(name, bool, None, [value])
                else:
                    check_value(name, o.typespec, o.choices, value)
                if name in checks:
                    checks[name](value)
            except exceptions.OptionsError as e:
                errors.append(f"{f}: {e}")
    return errors


_reported = None
"""The options object whose unknown names were reported (every script's Guard shares it)."""


class Guard:
    """The last addon of a ``-s`` script: converts and checks the ``--set`` values of the
    options the script registered (see the comment above), and, once every script is
    loaded, says which ``streamfix`` names no addon knows. Errors are logged (mitmdump
    exits on them at startup), never raised into mitmproxy's script loader."""

    def __init__(self, script: str) -> None:
        self.name = f"streamfix-options:{Path(script).name}"

    def load(self, loader) -> None:
        opts = loader.master.options
        tidy_help(opts)
        self.check_deferred(opts)
        if self._last_script(loader.master):
            self.check_unknown(opts)

    def running(self) -> None:
        from mitmproxy import ctx

        self.check_unknown(ctx.options)  # a script that failed to load hid the last one

    def check_deferred(self, opts) -> None:
        from mitmproxy import optmanager

        checks = value_checks()
        for name, value in list(opts.deferred.items()):
            o = opts._options.get(name)
            if o is None or not name.startswith(PREFIX):
                continue
            try:
                if isinstance(value, optmanager._UnconvertedStrings):
                    opts.deferred[name] = parse_value(name, o.typespec, o.choices, value.val, o.current())
                elif o.typespec is bool and isinstance(value, str):  # config.yaml: streamfix_status: "off"
                    opts.deferred[name] = parse_value(name, bool, None, [value], o.current())
                else:
                    check_value(name, o.typespec, o.choices, value)
                if name in checks:
                    checks[name](opts.deferred[name])
            except exceptions.OptionsError as e:
                del opts.deferred[name]  # converted by mitmproxy, it would unload the script silently
                logger.error(f"streamfix: {e}")

    def check_unknown(self, opts) -> None:
        global _reported
        if _reported is opts:  # once per process, whichever script's Guard gets there first
            return
        _reported = opts
        known = [n for n in opts.keys() if n.startswith(PREFIX)]  # noqa: SIM118 - OptManager has keys(), no __iter__
        for name in sorted(n for n in opts.deferred if n not in opts._options):
            if name.startswith(PREFIX):
                logger.error(f"streamfix: {unknown(name, known)}")
            else:
                logger.warning(f"option {name} is unknown to every addon; mitmproxy ignores it")

    @staticmethod
    def _last_script(master) -> bool:
        """Is every other ``-s`` script loaded (so every option is registered)?"""
        waiting = 0
        for path in master.options.scripts:
            s = master.addons.get(f"scriptmanager:{path}")
            if s is None or getattr(s, "ns", None) is None:
                waiting += 1
        return waiting <= 1


def tidy_help(opts) -> None:
    """One space between words in every streamfix option's help (``--options``, mitmweb's
    option editor): mitmproxy dedents a help text and joins its lines, which leaves the
    indentation of a triple-quoted text whose first line starts after the quotes."""
    for name, o in opts.items():
        if name.startswith(PREFIX):
            o.help = " ".join(o.help.split())


def build() -> str:
    """Which wire build runs: ``compiled`` (mypyc), ``pure`` or ``mixed``
    (streamfix/wire/_core.py; the log's "protocol core" line says why)."""
    from streamfix.wire import _core

    try:
        return _core.describe().split(" (", 1)[0]
    except Exception as e:  # noqa: BLE001 - the startup line must not fail over it
        return f"unknown ({type(e).__name__}: {e})"


def startup_line(opts, servers) -> str:
    """One line that says what runs: mode, rules on, build, listeners, upstream."""
    if not opts.streamfix:
        head = "streamfix: OFF (streamfix=false): nothing is repaired or checked"
    else:
        off = [n.removeprefix("streamfix_") for n in RULE_OPTIONS if not getattr(opts, n)]
        rules_on = f"{len(RULE_OPTIONS) - len(off)} of {len(RULE_OPTIONS)} rules on" + (
            f" (off: {', '.join(off)})" if off else ""
        )
        head = f"streamfix: {opts.streamfix_mode} mode, {rules_on}, truncation {opts.streamfix_truncation}"
        if opts.streamfix_mode == "check":
            head = "streamfix: check mode (no byte changed: violations reported per flow)"
    from mitmproxy.utils import human

    parts = []
    servers = list(servers)
    two_legs = any(isinstance(s.mode, mode_specs.ReverseMode) for s in servers)
    for server in servers:
        mode = server.mode
        addrs = " and ".join(sorted({human.format_address(a) for a in server.listen_addrs})) or "(not listening)"
        if isinstance(mode, mode_specs.ReverseMode):
            parts.append(f"clients at {addrs} -> upstream {mode.data}")
        elif isinstance(mode, mode_specs.RegularMode):
            parts.append(f"regular proxy at {addrs}" + (" (CPA's upstream leg)" if two_legs else ""))
        else:
            parts.append(f"{mode.description} at {addrs}")
    listeners = "; ".join(parts) or "no listener (reading flows)"
    skim = "" if getattr(opts, "streamfix_skim", True) else ", skimming off"
    return f"{head}, build {build()}{skim}; {listeners}"
