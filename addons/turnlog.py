"""streamfix: a JSON line per finished turn (``--set streamfix_log=PATH``).

Each line is one JSON object (:meth:`addons.turn.Turn.record` makes it): when, whose key (a short id or
a configured label, never the key), which API and model, the client leg's and the
upstream's token counts, the verdict with its evidence, the rules that fired, bytes,
events, time to first byte, duration and how the turn ended. ``python -m streamfix.usage
PATH`` sums them per key, model and day.

Writing: the standard ``logging`` machinery (logger ``streamfix.turns``, not propagated to
mitmproxy's console) with a JSON formatter and :class:`TurnLogHandler`, which writes each
line with one ``write(2)`` on a file opened ``O_APPEND``, so lines never interleave, even
with several sidecar processes on one file. Rotation is logrotate's job: the handler
notices when the file was moved or removed and reopens ``PATH`` (as
``logging.handlers.WatchedFileHandler`` does), so no ``copytruncate`` is needed.

Where turns come from: :func:`addons.shared.turn_finished`, which the client-leg addon
calls when an HTTP turn ends (response, error) and the WebSocket addon per turn.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from mitmproxy import ctx, exceptions
from streamfix.wire import redact

from . import shared
from .turn import iso_time

logger = logging.getLogger("streamfix.turnlog")
turns = logging.getLogger("streamfix.turns")
"""The logger the lines go to (one record per turn, the turn dict in ``record.turn``)."""
turns.propagate = False
turns.setLevel(logging.INFO)

_labels: list[tuple[str, str]] = []
_label_of_id: dict[str, str] = {}
"""Key id -> label, for keys labelled by prefix: a flow read after its credentials were
redacted (a WebSocket turn ends long after) has only the id, which a prefix cannot match."""
MAX_LABELLED_KEYS = 10_000


def client_label(header: Callable[[str], str | None], path: str = "") -> str:
    """The turn log's name for the key a request carries (``streamfix_key_labels``); also
    for a redacted key whose raw form was seen before (:func:`see_key`)."""
    key = redact.client_key(header, path)
    label = redact.key_label(key, _labels)
    if key and not redact.is_redacted(key):
        if label != redact.key_id(key) and len(_label_of_id) < MAX_LABELLED_KEYS:
            _label_of_id[redact.key_id(key)] = label
        return label
    return _label_of_id.get(label, label)


def see_key(header: Callable[[str], str | None], path: str = "") -> None:
    """Remember the label of a request's raw key before it is redacted (addons/redact.py
    calls this at ``requestheaders``)."""
    if _labels:
        client_label(header, path)


# --- writing ----------------------------------------------------------------------------


class JsonLineFormatter(logging.Formatter):
    """A record's ``turn`` dict as one line of JSON (its message otherwise)."""

    def format(self, record: logging.LogRecord) -> str:
        turn = getattr(record, "turn", None)
        if turn is None:
            turn = {"time": iso_time(record.created), "message": record.getMessage()}
        return orjson.dumps(turn, default=str).decode()


class TurnLogHandler(logging.handlers.WatchedFileHandler):
    """Appends each formatted record as one line with a single ``os.write`` on an
    ``O_APPEND`` descriptor; reopens the path when it was rotated away."""

    def __init__(self, path: str) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=False)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode("utf-8")
            self.reopenIfNeeded()
            if self.stream is None:
                self.stream = self._open()
            fd = self.stream.fileno()
            while line:  # a regular file takes it in one write; the loop is for safety
                n = os.write(fd, line)
                line = line[n:]
        except Exception:  # noqa: BLE001 - logging's own contract: handleError, never raise
            self.handleError(record)


def key_labels(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``streamfix_key_labels``' (pattern, name) pairs; OptionsError for one that is not PATTERN=NAME."""
    labels = []
    for spec in specs:
        pattern, eq, name = spec.partition("=")
        if not eq or not pattern.strip() or not name.strip():
            raise exceptions.OptionsError(
                f"streamfix_key_labels={spec}: give PATTERN=NAME, e.g. streamfix_key_labels=sk-team-a*=team-a "
                "(PATTERN: a key prefix ending in *, or a key id as the turn log shows it)"
            )
        labels.append((pattern.strip(), name.strip()))
    return labels


def check_log(path: str) -> None:
    """``streamfix_log`` names a file this process can create or append to; else
    OptionsError saying what to do. The file is opened for appending, as the addon will
    (a path the checks below let through, ``/proc/x``, can still refuse it); one this
    check created is removed again, so a failed start leaves nothing behind."""
    if not path:
        return
    p = Path(path).expanduser()
    if p.is_dir():
        raise exceptions.OptionsError(
            f"streamfix_log={path}: that is a folder; give a file in it, e.g. {p / 'turns.jsonl'}"
        )
    folder = p.parent
    if not folder.is_dir():
        there = next((a for a in (folder, *folder.parents) if a.exists()), None)  # the nearest that exists
        if there is not None and not there.is_dir():
            raise exceptions.OptionsError(
                f"streamfix_log={path}: {there} is a file, not a folder; give a path in a folder"
            )
        raise exceptions.OptionsError(
            f"streamfix_log={path}: the folder {folder} does not exist; create it (mkdir -p {folder}) or give "
            "a file in an existing folder"
        )
    target = p if p.exists() else folder
    if not os.access(target, os.W_OK):
        raise exceptions.OptionsError(
            f"streamfix_log={path}: {target} is not writable by this user (uid {os.getuid()}); "
            "give it write access or give another path"
        )
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as e:
        raise exceptions.OptionsError(
            f"streamfix_log={path}: cannot open it ({e.strerror or e}); give a file you can write"
        ) from None
    if not existed:
        try:
            p.unlink()
        except OSError:
            pass


CHECKS = {"streamfix_log": check_log, "streamfix_key_labels": key_labels}
"""This addon's value checks (addons/options.py runs them before anything listens)."""


class TurnLog:
    """Writes the turn log; see the module docstring."""

    def __init__(self) -> None:
        self.handler: TurnLogHandler | None = None
        self.written = 0

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_log",
            str,
            "",
            "Append one JSON line per finished turn to this file (key id or label, API, "
            "models, client and upstream token counts, verdict, rules fired, bytes, timing, "
            "how it ended). Rotate it with logrotate: the file is reopened when moved. "
            "Sum it with python -m streamfix.usage PATH.",
        )
        loader.add_option(
            "streamfix_key_labels",
            Sequence[str],
            [],
            "Names for client keys in the turn log, as PATTERN=NAME (repeat the option): "
            "PATTERN is a key id as the log shows it (12 hex digits) or a key prefix ending "
            "in * (sk-team-a*=team-a). Keys without a label appear as their id.",
        )

    def configure(self, updated: set[str]) -> None:
        if "streamfix_key_labels" in updated:
            _labels[:] = key_labels(ctx.options.streamfix_key_labels)
            _label_of_id.clear()
        if "streamfix_log" in updated:
            self._close()
            path = ctx.options.streamfix_log
            if path:
                check_log(path)
                try:
                    self.handler = TurnLogHandler(os.path.expanduser(path))
                except OSError as e:
                    raise exceptions.OptionsError(
                        f"streamfix_log={path}: cannot open it ({e.strerror or e}); give a file you can write"
                    ) from None
                self.handler.setFormatter(JsonLineFormatter())
                turns.addHandler(self.handler)
                shared.add_turn_sink(self.write)

    def write(self, turn: dict[str, Any]) -> None:
        turns.info("turn", extra={"turn": turn})
        self.written += 1

    def _close(self) -> None:
        shared.remove_turn_sink(self.write)
        if self.handler is not None:
            turns.removeHandler(self.handler)
            self.handler.close()
            self.handler = None

    def done(self) -> None:
        if self.written:
            logger.info(f"streamfix: {self.written} turns written to {ctx.options.streamfix_log}")
        self._close()
